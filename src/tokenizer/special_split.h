// SpecialTokenSplitter: cuts text at occurrences of a vocabulary's special
// tokens (control, user-defined, unknown) before the text is tokenized, with
// llama.cpp's rules for overlapping occurrences.
//
// Contract:
// - The rule it reproduces (llama.cpp's tokenizer_st_partition): tokens are
//   taken in priority order (the order given to the constructor; Tokenizer
//   gives longest text first, then lowest id); each one claims, left to right, every occurrence
//   that does not overlap text already claimed by an earlier token or by its
//   own previous occurrence. What no token claims stays raw.
// - split() returns the fragments in text order, covering the text exactly
//   once; raw fragments are maximal (never two in a row) and never empty.
// - Cost: one pass of an Aho-Corasick automaton over the text (amortised
//   constant work per byte, however many patterns share a prefix), plus, for
//   each group of occurrences close enough to overlap, the rule above replayed
//   on that group's bytes with only the tokens found there.
//
// Threading: immutable after construction; split() is safe from many threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::tokenizer {

// A piece of text as encode() sees it: a special token's text, or raw text.
struct TextFragment {
  int32_t token;  // -1 for raw text
  size_t offset;  // bytes into the text
  size_t length;

  bool operator==(const TextFragment&) const = default;
};

class SpecialTokenSplitter {
 public:
  struct Pattern {
    std::string text;          // non-empty, distinct from every other pattern's
    int32_t token;             // what the fragment reports
    bool needs_parse_special;  // recognised only when split() is asked to
  };

  SpecialTokenSplitter() = default;  // recognises nothing
  // `patterns` in priority order: the earlier of two overlapping ones wins.
  explicit SpecialTokenSplitter(std::vector<Pattern> patterns);

  // Fragments of `text`; patterns with needs_parse_special take part only
  // when parse_special is true (the others play no part at all).
  std::vector<TextFragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Group;
  class Emitter;

  int32_t child(int32_t node, uint8_t byte) const;  // -1 when absent (never for the root)
  int32_t step(int32_t state, uint8_t byte) const;
  void build_trie(std::vector<std::vector<std::pair<uint8_t, int32_t>>> children);
  void link_failures();
  void resolve(std::string_view text, Group& group, Emitter& out) const;

  std::vector<Pattern> patterns_;  // by priority, the index is the rank
  // The automaton: node 0 is the root, whose transitions are dense (most bytes
  // of ordinary text stay there); other nodes keep sorted sparse edges.
  std::array<int32_t, 256> root_next_{};
  std::vector<uint32_t> edge_begin_;  // per node, into edge_bytes_/edge_next_; one extra at the end
  std::vector<uint8_t> edge_bytes_;
  std::vector<int32_t> edge_next_;
  std::vector<int32_t> fail_;     // longest proper suffix that is also a trie node
  std::vector<int32_t> rank_at_;  // pattern ending exactly at the node, -1 if none
  std::vector<int32_t>
      output_;  // nearest node on the failure chain (self included) ending a pattern
  // Depth of the deepest node on the failure chain (self included) with
  // children: how far back an occurrence not yet reported can start.
  std::vector<uint32_t> reach_;
};

}  // namespace minfer::tokenizer
