#include "tokenizer/special_split.h"

#include <algorithm>
#include <utility>

namespace minfer::tokenizer {

// Occurrences that may interact: everything the automaton reported since the
// last flush. Only the ranks found are kept; the bytes are scanned again when
// the group holds more than one occurrence (see resolve()).
struct SpecialTokenSplitter::Group {
  size_t begin = 0;
  size_t end = 0;
  size_t count = 0;
  std::vector<int32_t> ranks;  // each once
  // Which ranks `ranks` holds, sized on the first group with two occurrences:
  // a long run of one byte (Gemma has tokens for 2..31 spaces) reports dozens
  // of occurrences per byte, all of the same few tokens.
  std::vector<uint8_t> seen;

  void add(size_t start, size_t stop, int32_t rank, size_t n_patterns) {
    begin = count == 0 ? start : std::min(begin, start);
    end = std::max(end, stop);
    if (count++ == 0) {
      ranks.assign(1, rank);
      return;
    }
    if (count == 2) {
      if (seen.empty()) seen.assign(n_patterns, 0);
      seen[ranks[0]] = 1;
    }
    if (!seen[rank]) {
      seen[rank] = 1;
      ranks.push_back(rank);
    }
  }
  void clear() {
    if (!seen.empty()) {
      for (int32_t r : ranks) seen[r] = 0;
    }
    count = 0;
    end = 0;
    ranks.clear();
  }
};

// Appends token fragments in text order and fills the gaps with raw ones.
class SpecialTokenSplitter::Emitter {
 public:
  explicit Emitter(size_t text_size) : size_(text_size) {}
  void token(int32_t id, size_t offset, size_t length) {
    if (offset > raw_begin_) frags_.push_back({-1, raw_begin_, offset - raw_begin_});
    frags_.push_back({id, offset, length});
    raw_begin_ = offset + length;
  }
  std::vector<TextFragment> finish() {
    if (raw_begin_ < size_) frags_.push_back({-1, raw_begin_, size_ - raw_begin_});
    return std::move(frags_);
  }

 private:
  size_t size_;
  size_t raw_begin_ = 0;
  std::vector<TextFragment> frags_;
};

SpecialTokenSplitter::SpecialTokenSplitter(std::vector<Pattern> patterns)
    : patterns_(std::move(patterns)) {
  std::vector<std::vector<std::pair<uint8_t, int32_t>>> children(1);
  rank_at_.assign(1, -1);
  for (size_t rank = 0; rank < patterns_.size(); ++rank) {
    int32_t node = 0;
    for (char ch : patterns_[rank].text) {
      const auto byte = static_cast<uint8_t>(ch);
      const auto& kids = children[node];
      auto it =
          std::find_if(kids.begin(), kids.end(), [&](const auto& e) { return e.first == byte; });
      if (it != kids.end()) {
        node = it->second;
        continue;
      }
      const auto fresh = static_cast<int32_t>(children.size());
      children[node].emplace_back(byte, fresh);
      children.emplace_back();
      rank_at_.push_back(-1);
      node = fresh;
    }
    rank_at_[node] = static_cast<int32_t>(rank);
  }
  build_trie(std::move(children));
  link_failures();
}

// Flattens the children lists into sorted edge arrays.
void SpecialTokenSplitter::build_trie(
    std::vector<std::vector<std::pair<uint8_t, int32_t>>> children) {
  edge_begin_.assign(1, 0);
  for (auto& kids : children) {
    std::sort(kids.begin(), kids.end());
    for (const auto& [byte, next] : kids) {
      edge_bytes_.push_back(byte);
      edge_next_.push_back(next);
    }
    edge_begin_.push_back(static_cast<uint32_t>(edge_bytes_.size()));
  }
  root_next_.fill(0);
  for (const auto& [byte, next] : children[0]) root_next_[byte] = next;
}

int32_t SpecialTokenSplitter::child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_next_[byte];
  const auto first = edge_bytes_.begin() + edge_begin_[node];
  const auto last = edge_bytes_.begin() + edge_begin_[node + 1];
  const auto it = std::lower_bound(first, last, byte);
  return it != last && *it == byte ? edge_next_[it - edge_bytes_.begin()] : -1;
}

// The automaton's transition: on a miss, fall back to shorter suffixes.
int32_t SpecialTokenSplitter::step(int32_t state, uint8_t byte) const {
  for (;;) {
    if (state == 0) return root_next_[byte];
    const int32_t next = child(state, byte);
    if (next >= 0) return next;
    state = fail_[state];
  }
}

// Breadth first, so a node's failure target (shallower) is done before it.
void SpecialTokenSplitter::link_failures() {
  const size_t n = rank_at_.size();
  fail_.assign(n, 0);
  output_.assign(n, -1);
  reach_.assign(n, 0);
  std::vector<uint32_t> depth(n, 0);
  std::vector<int32_t> queue;
  queue.reserve(n);
  queue.push_back(0);
  for (size_t head = 0; head < queue.size(); ++head) {
    const int32_t u = queue[head];
    const bool has_children = edge_begin_[u + 1] > edge_begin_[u];
    if (u != 0) {
      output_[u] = rank_at_[u] >= 0 ? u : output_[fail_[u]];
      reach_[u] = has_children ? depth[u] : reach_[fail_[u]];
    }
    for (uint32_t e = edge_begin_[u]; e < edge_begin_[u + 1]; ++e) {
      const int32_t v = edge_next_[e];
      depth[v] = depth[u] + 1;
      if (u != 0) {
        int32_t f = fail_[u];
        int32_t t;
        while ((t = child(f, edge_bytes_[e])) < 0) f = fail_[f];
        fail_[v] = t;
      }
      queue.push_back(v);
    }
  }
}

std::vector<TextFragment> SpecialTokenSplitter::split(std::string_view text,
                                                      bool parse_special) const {
  Emitter out(text.size());
  Group group;
  int32_t state = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    state = step(state, static_cast<uint8_t>(text[i]));
    // Every pattern ending here, longest first.
    for (int32_t o = output_[state]; o >= 0; o = output_[fail_[o]]) {
      const Pattern& p = patterns_[rank_at_[o]];
      if (p.needs_parse_special && !parse_special) continue;
      group.add(i + 1 - p.text.size(), i + 1, rank_at_[o], patterns_.size());
    }
    // A later occurrence starts no earlier than the longest suffix read so far
    // that can still grow into a pattern; past the group's end, none can
    // overlap it and it is settled.
    if (group.count > 0 && group.end + reach_[state] <= i + 1) resolve(text, group, out);
  }
  if (group.count > 0) resolve(text, group, out);
  return out.finish();
}

// Applies the priority rule to one group. No occurrence outside the group
// overlaps its span, so replaying the rule on the span's bytes with only the
// tokens found there gives what replaying it on the whole text would.
void SpecialTokenSplitter::resolve(std::string_view text, Group& group, Emitter& out) const {
  if (group.count == 1) {
    out.token(patterns_[group.ranks[0]].token, group.begin, group.end - group.begin);
    group.clear();
    return;
  }
  std::sort(group.ranks.begin(), group.ranks.end());  // ascending rank: priority order
  std::vector<TextFragment> frags{{-1, group.begin, group.end - group.begin}};
  std::vector<TextFragment> next;
  for (int32_t rank : group.ranks) {
    const Pattern& p = patterns_[rank];
    next.clear();
    for (const TextFragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      // Leftmost first, each occurrence resuming after the previous one.
      const std::string_view run = text.substr(f.offset, f.length);
      size_t pos = 0;
      for (size_t hit; (hit = run.find(p.text, pos)) != std::string_view::npos;
           pos = hit + p.text.size()) {
        if (hit > pos) next.push_back({-1, f.offset + pos, hit - pos});
        next.push_back({p.token, f.offset + hit, p.text.size()});
      }
      if (pos < run.size()) next.push_back({-1, f.offset + pos, run.size() - pos});
    }
    frags.swap(next);
  }
  for (const TextFragment& f : frags) {
    if (f.token >= 0) out.token(f.token, f.offset, f.length);
  }
  group.clear();
}

}  // namespace minfer::tokenizer
