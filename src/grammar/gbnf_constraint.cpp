#include "grammar/gbnf_constraint.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/utf8.h"

namespace minfer::grammar {
namespace {

// Depth-first walk of the token trie from a set of stacks: a child is
// visited only if some stack survives its byte, and the tokens ending there
// are allowed. `sets_` holds every level's stacks back to back; a level is
// undone by truncating `sets_` and the arena.
class TrieWalk {
 public:
  TrieWalk(const TokenTrie& trie, GbnfRecognizer& r, std::vector<GbnfFrame>& arena,
           std::vector<uint8_t>& allowed)
      : trie_(trie), r_(r), arena_(arena), allowed_(allowed) {}

  void run(const std::vector<int32_t>& stacks, Utf8Partial partial) {
    sets_.assign(stacks.begin(), stacks.end());
    walk(0, 0, sets_.size(), partial);
  }

 private:
  void walk(uint32_t node, size_t begin, size_t end, Utf8Partial partial) {
    const TokenTrie::TrieNode& tn = trie_.nodes[node];
    for (uint32_t child = tn.first_child; child < tn.first_child + tn.n_children; ++child) {
      const TokenTrie::TrieNode& cn = trie_.nodes[child];
      const size_t arena_mark = arena_.size();
      const size_t next_begin = sets_.size();
      Utf8Partial next;
      if (r_.step(sets_, begin, end, partial, cn.byte, next)) {
        const size_t next_end = r_.dedupe(sets_, next_begin);
        sets_.resize(next_end);
        if (next_end > next_begin) {
          for (uint32_t k = 0; k < cn.n_tokens; ++k) allowed_[trie_.tokens[cn.first_token + k]] = 1;
          if (cn.n_children > 0) walk(child, next_begin, next_end, next);
        }
      }
      sets_.resize(next_begin);
      arena_.resize(arena_mark);
    }
  }

  const TokenTrie& trie_;
  GbnfRecognizer& r_;
  std::vector<GbnfFrame>& arena_;
  std::vector<uint8_t>& allowed_;
  std::vector<int32_t> sets_;
};

}  // namespace

GbnfConstraint::GbnfConstraint(std::shared_ptr<const GbnfGrammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

Result<GbnfConstraint> GbnfConstraint::create(std::shared_ptr<const GbnfGrammar> grammar,
                                              std::shared_ptr<const TokenVocabulary> vocab) {
  if (grammar == nullptr || vocab == nullptr) {
    return Status::invalid_argument("grammar constraint: null grammar or vocabulary");
  }
  GbnfConstraint c(std::move(grammar), std::move(vocab));
  GbnfRecognizer r(*c.grammar_, c.arena_);
  r.start(c.stacks_);
  if (r.overflowed()) {
    return Status::invalid_argument(
        "GBNF grammar: the start of rule 'root' has more than " + std::to_string(kMaxGbnfStacks) +
        " alternatives or nests deeper than " + std::to_string(kMaxGbnfStackDepth) +
        " rules (docs/GRAMMAR.md, \"Limits\")");
  }
  return c;
}

bool GbnfConstraint::complete() const {
  if (ended_ || partial_.pending > 0) return false;
  return std::find(stacks_.begin(), stacks_.end(), -1) != stacks_.end();
}

Status GbnfConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  if (ended_) return Status::out_of_range("grammar constraint: generation already ended");
  allowed.assign(static_cast<size_t>(vocab_->size()), 0);
  std::vector<GbnfFrame> arena = arena_;  // the walk pushes and pops frames on a copy
  GbnfRecognizer r(*grammar_, arena);
  TrieWalk(vocab_->all_trie(), r, arena, allowed).run(stacks_, partial_);
  if (complete()) {
    for (int32_t id : vocab_->eog_tokens()) allowed[id] = 1;
  }
  if (std::find(allowed.begin(), allowed.end(), 1) == allowed.end()) {
    return Status::invalid_argument("grammar constraint: no token of the vocabulary can follow " +
                                    std::to_string(text_.size()) + " bytes of text");
  }
  return Status::ok();
}

Status GbnfConstraint::mask(std::span<float> logits) const {
  return mask_logits(logits, vocab_->size(), "grammar constraint",
                     [this](std::vector<uint8_t>& a) { return allowed_tokens(a); });
}

Status GbnfConstraint::accept(int32_t token) {
  if (ended_) return Status::out_of_range("grammar constraint: generation already ended");
  if (token < 0 || token >= vocab_->size()) {
    return Status::invalid_argument("grammar constraint: token id " + std::to_string(token) +
                                    " outside the vocabulary");
  }
  const TokenInfo& info = vocab_->token(token);
  const std::string name =
      "token " + std::to_string(token) + " \"" + printable_text(info.bytes) + "\"";
  if (info.is_eog) {
    if (!complete()) {
      return Status::invalid_argument("grammar constraint: end of generation (" + name +
                                      ") before the grammar's text is complete");
    }
    ended_ = true;
    return Status::ok();
  }
  if (info.is_special || info.bytes.empty()) {
    return Status::invalid_argument("grammar constraint: " + name + " is a special token");
  }
  return accept_bytes(info.bytes).with_context(name);
}

Status GbnfConstraint::accept_bytes(std::string_view bytes) {
  if (ended_) return Status::out_of_range("grammar constraint: generation already ended");
  const size_t arena_mark = arena_.size();
  GbnfRecognizer r(*grammar_, arena_);
  std::vector<int32_t> sets = stacks_;
  Utf8Partial partial = partial_;
  size_t begin = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const size_t end = sets.size();
    Utf8Partial next;
    const bool utf8 = r.step(sets, begin, end, partial, static_cast<uint8_t>(bytes[i]), next);
    sets.resize(r.dedupe(sets, end));
    if (!utf8 || sets.size() == end || r.overflowed()) {
      arena_.resize(arena_mark);
      const std::string where = "byte " + std::to_string(i) + " (after " +
                                std::to_string(text_.size()) + " bytes of text)";
      if (r.overflowed()) {
        return Status::resource_exhausted("grammar constraint: more than " +
                                          std::to_string(kMaxGbnfStacks) +
                                          " parse stacks or a stack deeper than " +
                                          std::to_string(kMaxGbnfStackDepth) + " at " + where);
      }
      return Status::invalid_argument("grammar constraint: the grammar does not allow " + where);
    }
    sets.erase(sets.begin(), sets.begin() + static_cast<ptrdiff_t>(end));
    partial = next;
    begin = 0;
  }
  stacks_ = std::move(sets);
  partial_ = partial;
  text_ += bytes;
  compact();
  return Status::ok();
}

// Copies the frames the live stacks reach into a fresh arena, so that the
// arena stays proportional to the live stacks, not to the text.
void GbnfConstraint::compact() {
  std::vector<GbnfFrame> fresh;
  std::vector<int32_t> remap(arena_.size(), -1);
  std::vector<int32_t> path;
  for (int32_t& s : stacks_) {
    if (s < 0) continue;
    path.clear();
    for (int32_t x = s; x >= 0 && remap[x] < 0; x = arena_[x].parent) path.push_back(x);
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      GbnfFrame f = arena_[*it];
      if (f.parent >= 0) f.parent = remap[f.parent];
      remap[*it] = static_cast<int32_t>(fresh.size());
      fresh.push_back(f);
    }
    s = remap[s];
  }
  arena_ = std::move(fresh);
}

}  // namespace minfer::grammar
