#include "grammar/json_constraint.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/utf8.h"

namespace minfer::grammar {
namespace {

// Depth-first walk of a token trie from a set of states: a child is visited
// only if some state survives its byte, and the tokens ending there are
// allowed. `sets` holds the state set of every level of the walk back to back;
// a level's steps are undone by truncating `sets` and the arena.
class TrieWalk {
 public:
  TrieWalk(const TokenTrie& trie, Recognizer& r, std::vector<Frame>& arena,
           std::vector<uint8_t>& allowed)
      : trie_(trie), r_(r), arena_(arena), allowed_(allowed) {}

  void run(const std::vector<int32_t>& states) {
    sets_.assign(states.begin(), states.end());
    walk(0, 0, sets_.size());
  }

 private:
  void walk(uint32_t node, size_t begin, size_t end) {
    const TokenTrie::TrieNode& tn = trie_.nodes[node];
    for (uint32_t child = tn.first_child; child < tn.first_child + tn.n_children; ++child) {
      const TokenTrie::TrieNode& cn = trie_.nodes[child];
      const size_t arena_mark = arena_.size();
      const size_t next_begin = sets_.size();
      for (size_t i = begin; i < end; ++i) r_.step(sets_[i], cn.byte, sets_);
      const size_t next_end = r_.dedupe(sets_, next_begin);
      sets_.resize(next_end);
      if (next_end > next_begin) {
        for (uint32_t k = 0; k < cn.n_tokens; ++k) allowed_[trie_.tokens[cn.first_token + k]] = 1;
        if (cn.n_children > 0) walk(child, next_begin, next_end);
      }
      sets_.resize(next_begin);
      arena_.resize(arena_mark);
    }
  }

  const TokenTrie& trie_;
  Recognizer& r_;
  std::vector<Frame>& arena_;
  std::vector<uint8_t>& allowed_;
  std::vector<int32_t> sets_;
};

}  // namespace

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  Recognizer r(*grammar_, arena_);
  states_.push_back(r.start(grammar_->root()));
}

Result<JsonConstraint> JsonConstraint::create(std::shared_ptr<const JsonGrammar> grammar,
                                              std::shared_ptr<const TokenVocabulary> vocab) {
  if (grammar == nullptr || vocab == nullptr) {
    return Status::invalid_argument("json constraint: null grammar or vocabulary");
  }
  return JsonConstraint(std::move(grammar), std::move(vocab));
}

bool JsonConstraint::complete() const {
  if (ended_) return false;
  return std::any_of(states_.begin(), states_.end(),
                     [&](int32_t s) { return state_can_end(arena_, s); });
}

Status JsonConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  if (ended_) return Status::out_of_range("json constraint: generation already ended");
  allowed.assign(static_cast<size_t>(vocab_->size()), 0);
  std::vector<Frame> arena = arena_;  // the walk pushes and pops frames on a copy
  Recognizer r(*grammar_, arena);
  // Inside a string, plain-text tokens are decided by length alone; only the
  // other tokens need the trie walk (see token_vocabulary.h).
  std::vector<int32_t> in_string;
  std::vector<int32_t> others;
  int64_t capacity = -1;
  for (int32_t s : states_) {
    int64_t cap = 0;
    if (r.is_free_string(s, cap)) {
      in_string.push_back(s);
      capacity = std::max(capacity, cap);
    } else {
      others.push_back(s);
    }
  }
  if (!others.empty()) TrieWalk(vocab_->all_trie(), r, arena, allowed).run(others);
  if (!in_string.empty()) {
    TrieWalk(vocab_->non_plain_trie(), r, arena, allowed).run(in_string);
    for (const auto& [length, id] : vocab_->plain_by_length()) {
      if (length > capacity) break;
      allowed[id] = 1;
    }
  }
  if (std::any_of(states_.begin(), states_.end(), [&](int32_t s) { return r.can_end(s); })) {
    for (int32_t id : vocab_->eog_tokens()) allowed[id] = 1;
  }
  if (std::find(allowed.begin(), allowed.end(), 1) == allowed.end()) {
    return Status::invalid_argument("json constraint: no token of the vocabulary can follow " +
                                    std::to_string(text_.size()) + " bytes of JSON text");
  }
  return Status::ok();
}

Status JsonConstraint::mask(std::span<float> logits) const {
  return mask_logits(logits, vocab_->size(), "json constraint",
                     [this](std::vector<uint8_t>& a) { return allowed_tokens(a); });
}

Status JsonConstraint::accept(int32_t token) {
  if (ended_) return Status::out_of_range("json constraint: generation already ended");
  if (token < 0 || token >= vocab_->size()) {
    return Status::invalid_argument("json constraint: token id " + std::to_string(token) +
                                    " outside the vocabulary");
  }
  const TokenInfo& info = vocab_->token(token);
  const std::string name =
      "token " + std::to_string(token) + " \"" + printable_text(info.bytes) + "\"";
  if (info.is_eog) {
    if (!complete()) {
      return Status::invalid_argument("json constraint: end of generation (" + name +
                                      ") before the JSON value is complete");
    }
    ended_ = true;
    return Status::ok();
  }
  if (info.is_special || info.bytes.empty()) {
    return Status::invalid_argument("json constraint: " + name + " is a special token");
  }
  const size_t arena_mark = arena_.size();
  Recognizer r(*grammar_, arena_);
  std::vector<int32_t> states = states_;
  std::vector<int32_t> next;
  for (size_t i = 0; i < info.bytes.size(); ++i) {
    next.clear();
    for (int32_t s : states) r.step(s, static_cast<uint8_t>(info.bytes[i]), next);
    next.resize(r.dedupe(next, 0));
    if (next.empty() || next.size() > kMaxStates) {
      arena_.resize(arena_mark);
      const std::string where = " at its byte " + std::to_string(i) + " (after " +
                                std::to_string(text_.size()) + " bytes of JSON text)";
      if (!next.empty()) {
        return Status::resource_exhausted("json constraint: more than " +
                                          std::to_string(kMaxStates) + " parse states" + where);
      }
      return Status::invalid_argument("json constraint: " + name + " is not allowed" + where);
    }
    states.swap(next);
  }
  states_ = std::move(states);
  text_ += info.bytes;
  compact();
  return Status::ok();
}

// Copies the frames the live states reach into a fresh arena, so that the
// arena stays proportional to the live stacks, not to the text.
void JsonConstraint::compact() {
  std::vector<Frame> fresh;
  std::vector<int32_t> remap(arena_.size(), -1);
  std::vector<int32_t> path;
  for (int32_t& s : states_) {
    path.clear();
    for (int32_t x = s; x >= 0 && remap[x] < 0; x = arena_[x].parent) path.push_back(x);
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      Frame f = arena_[*it];
      if (f.parent >= 0) f.parent = remap[f.parent];
      remap[*it] = static_cast<int32_t>(fresh.size());
      fresh.push_back(f);
    }
    s = remap[s];
  }
  arena_ = std::move(fresh);
}

}  // namespace minfer::grammar
