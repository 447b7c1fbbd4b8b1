#include "grammar/token_vocabulary.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <string_view>

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

namespace minfer::grammar {
namespace {

// Bytes that stay inside a JSON string's characters whatever comes before:
// whole UTF-8 characters, none of them '"', '\\' or a control.
bool is_plain_string_text(std::string_view bytes) {
  for (char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    if (b < 0x20 || b == '"' || b == '\\') return false;
  }
  return find_invalid_utf8(bytes) == kUtf8Valid;
}

int32_t code_points(std::string_view bytes) {
  int32_t n = 0;
  for (char ch : bytes) n += (static_cast<uint8_t>(ch) & 0xC0) != 0x80;
  return n;
}

}  // namespace

TokenTrie TokenTrie::build(const std::vector<TokenInfo>& infos, const std::vector<int32_t>& ids) {
  std::vector<int32_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end(), [&](int32_t x, int32_t y) {
    return infos[x].bytes != infos[y].bytes ? infos[x].bytes < infos[y].bytes : x < y;
  });
  TokenTrie trie;
  trie.nodes.emplace_back();
  struct Pending {
    uint32_t node;
    size_t lo, hi, depth;  // sorted[lo, hi) share their first `depth` bytes
  };
  std::deque<Pending> todo = {{0, 0, sorted.size(), 0}};
  // Breadth first, so that each node's children are allocated side by side.
  while (!todo.empty()) {
    const Pending p = todo.front();
    todo.pop_front();
    size_t i = p.lo;
    trie.nodes[p.node].first_token = static_cast<uint32_t>(trie.tokens.size());
    for (; i < p.hi && infos[sorted[i]].bytes.size() == p.depth; ++i) {
      trie.tokens.push_back(sorted[i]);
    }
    trie.nodes[p.node].n_tokens = static_cast<uint32_t>(i - p.lo);
    trie.nodes[p.node].first_child = static_cast<uint32_t>(trie.nodes.size());
    while (i < p.hi) {
      const char byte = infos[sorted[i]].bytes[p.depth];
      size_t j = i;
      while (j < p.hi && infos[sorted[j]].bytes[p.depth] == byte) ++j;
      TrieNode child;
      child.byte = static_cast<uint8_t>(byte);
      todo.push_back({static_cast<uint32_t>(trie.nodes.size()), i, j, p.depth + 1});
      trie.nodes.push_back(child);
      ++trie.nodes[p.node].n_children;
      i = j;
    }
  }
  return trie;
}

TokenVocabulary::TokenVocabulary(std::vector<TokenInfo> tokens) : tokens_(std::move(tokens)) {
  std::vector<int32_t> eligible;
  std::vector<int32_t> non_plain;
  for (int32_t id = 0; id < size(); ++id) {
    const TokenInfo& t = tokens_[id];
    if (t.is_eog) {
      eog_.push_back(id);
      continue;
    }
    if (t.is_special || t.bytes.empty()) continue;
    eligible.push_back(id);
    if (is_plain_string_text(t.bytes)) {
      plain_.emplace_back(code_points(t.bytes), id);
    } else {
      non_plain.push_back(id);
    }
  }
  std::sort(plain_.begin(), plain_.end());
  all_ = TokenTrie::build(tokens_, eligible);
  non_plain_ = TokenTrie::build(tokens_, non_plain);
}

Result<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::create(
    std::vector<TokenInfo> tokens) {
  if (tokens.empty()) return Status::invalid_argument("token vocabulary: no tokens");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::invalid_argument("token vocabulary: more than INT32_MAX tokens");
  }
  return std::shared_ptr<const TokenVocabulary>(new TokenVocabulary(std::move(tokens)));
}

Result<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::from_tokenizer(
    const tokenizer::Tokenizer& tokenizer) {
  using tokenizer::TokenType;
  std::vector<TokenInfo> tokens(static_cast<size_t>(std::max(tokenizer.n_vocab(), 0)));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    const TokenType type = tokenizer.token_type(id);
    tokens[id].bytes = tokenizer.token_to_piece(id, /*render_special=*/false);
    tokens[id].is_eog = tokenizer.is_eog(id);
    tokens[id].is_special =
        type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused;
  }
  return create(std::move(tokens));
}

}  // namespace minfer::grammar
