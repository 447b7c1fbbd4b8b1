// Regex pre-tokenization for byte-level BPE: splits text into the words that
// BPE merges never cross.
//
// Contract: a pre-tokenizer is a list of PCRE2 patterns (UTF + UCP) applied in
// turn; each pattern splits every piece the previous one produced into its
// matches and the unmatched gaps between them (gaps are kept, nothing is
// lost). Patterns are compiled once by create(); compile errors are values.
// split() expects well-formed UTF-8 (the caller validates).
//
// Threading: immutable after create(); split() is safe to call concurrently
// (each call uses its own match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace minfer::tokenizer {

// The patterns llama.cpp uses for a `tokenizer.ggml.pre` name; error for names
// not supported here.
Result<std::vector<std::string>> pre_tokenizer_patterns(const std::string& pre);

class RegexSplitter {
 public:
  static Result<RegexSplitter> create(const std::vector<std::string>& patterns);

  // Pieces of `text` as (offset, length) pairs, in order, covering all of it.
  std::vector<std::pair<size_t, size_t>> split(std::string_view text) const;

 private:
  struct Compiled;
  explicit RegexSplitter(std::vector<std::shared_ptr<const Compiled>> c)
      : compiled_(std::move(c)) {}
  void split_one(const Compiled& re, std::string_view text, size_t base, size_t length,
                 std::vector<std::pair<size_t, size_t>>& out) const;
  std::vector<std::shared_ptr<const Compiled>> compiled_;
};

}  // namespace minfer::tokenizer
