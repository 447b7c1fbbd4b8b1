// Test helpers: reading minfer vocab dumps (format in tools/dump_gguf_vocab.py)
// and the JSON goldens written by tools/gen_tokenizer_goldens.py.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace minfer::tokenizer::testing {

Result<std::string> read_file(const std::string& path);
Result<Vocab> load_vocab_dump(const std::string& path);

struct GoldenCase {
  std::string text;
  bool add_special = false;
  bool parse_special = false;
  std::vector<int32_t> ids;
  std::string detok;  // bytes llama.cpp's detokenizer produced
};

Result<std::vector<GoldenCase>> load_golden(const std::string& path);

// "[1, 2, 3]" for failure messages.
std::string ids_to_string(const std::vector<int32_t>& ids);

}  // namespace minfer::tokenizer::testing
