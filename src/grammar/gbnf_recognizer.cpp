#include "grammar/gbnf_recognizer.h"

#include <algorithm>

namespace minfer::grammar {

using Kind = GbnfElement::Kind;

int32_t GbnfRecognizer::push(int32_t parent, int32_t pos) {
  GbnfFrame f;
  f.parent = parent;
  f.pos = pos;
  f.depth = parent < 0 ? 1 : arena_[parent].depth + 1;
  if (f.depth > kMaxGbnfStackDepth) {
    overflowed_ = true;
    return -2;
  }
  const uint32_t below = parent < 0 ? 0x9e3779b9u : arena_[parent].hash;
  f.hash = (below ^ static_cast<uint32_t>(pos)) * 0x01000193u + (below >> 7);
  arena_.push_back(f);
  return static_cast<int32_t>(arena_.size() - 1);
}

// Expands `frame` until every resulting stack's top is a character class (or
// the stack is empty), appending those stacks to `out`.
void GbnfRecognizer::expand(int32_t frame, std::vector<int32_t>& out, size_t out_begin) {
  if (frame == -2) return;
  if (out.size() - out_begin > kMaxGbnfStacks) {
    overflowed_ = true;
    return;
  }
  if (frame < 0) {
    out.push_back(-1);
    return;
  }
  const GbnfFrame f = arena_[frame];
  const GbnfElement& e = g_.element(f.pos);
  if (e.kind == Kind::kChars) {
    out.push_back(frame);
    return;
  }
  // A rule reference: what follows it in its alternative goes below (nothing
  // when it is last: a tail call keeps right recursion flat).
  const bool last = g_.element(f.pos + 1).kind == Kind::kEnd;
  const int32_t below = last ? f.parent : push(f.parent, f.pos + 1);
  if (below == -2) return;
  for (int32_t alt : g_.alternatives(e.rule)) {
    if (g_.element(alt).kind == Kind::kEnd) {
      expand(below, out, out_begin);
    } else {
      expand(push(below, alt), out, out_begin);
    }
  }
}

void GbnfRecognizer::start(std::vector<int32_t>& out) {
  const size_t begin = out.size();
  for (int32_t alt : g_.alternatives(g_.root())) {
    if (g_.element(alt).kind == Kind::kEnd) {
      out.push_back(-1);
    } else {
      expand(push(-1, alt), out, begin);
    }
  }
  out.resize(dedupe(out, begin));
}

void GbnfRecognizer::advance(int32_t top, uint32_t cp, std::vector<int32_t>& out) {
  if (top < 0) return;  // a finished text takes nothing more
  const GbnfFrame f = arena_[top];
  if (!g_.matches(g_.element(f.pos), cp)) return;
  const bool last = g_.element(f.pos + 1).kind == Kind::kEnd;
  const size_t begin = out.size();
  expand(last ? f.parent : push(f.parent, f.pos + 1), out, begin);
}

bool GbnfRecognizer::step(std::vector<int32_t>& in, size_t begin, size_t end, Utf8Partial partial,
                          uint8_t byte, Utf8Partial& next) {
  if (partial.pending > 0) {
    if ((byte & 0xC0) != 0x80) return false;
    next = {(partial.value << 6) | (byte & 0x3F), static_cast<uint8_t>(partial.pending - 1),
            partial.length};
  } else if (byte < 0x80) {
    next = {byte, 0, 1};
  } else if (byte >= 0xC2 && byte <= 0xDF) {
    next = {static_cast<uint32_t>(byte & 0x1F), 1, 2};
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    next = {static_cast<uint32_t>(byte & 0x0F), 2, 3};
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    next = {static_cast<uint32_t>(byte & 0x07), 3, 4};
  } else {
    return false;
  }
  // The least code point a sequence of this length may encode: shorter
  // (overlong) forms would let "\xE0\x80\xAE" pass for '.'.
  static constexpr uint32_t kLeast[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (next.pending > 0) {
    // The code points this prefix can still become.
    const uint32_t shift = 6u * next.pending;
    const uint32_t lo = std::max(next.value << shift, kLeast[next.length]);
    const uint32_t hi = std::min((next.value << shift) | ((1u << shift) - 1), 0x10FFFFu);
    if (lo > hi) return false;
    for (size_t i = begin; i < end; ++i) {
      const int32_t s = in[i];
      if (s >= 0 && g_.may_match(g_.element(arena_[s].pos), lo, hi)) in.push_back(s);
    }
    return true;
  }
  if (next.value < kLeast[next.length] || next.value > 0x10FFFF ||
      (next.value >= 0xD800 && next.value <= 0xDFFF)) {
    return false;
  }
  const uint32_t cp = next.value;
  const size_t out_begin = in.size();
  for (size_t i = begin; i < end; ++i) {
    advance(in[i], cp, in);
    if (in.size() - out_begin > kMaxGbnfStacks) {
      overflowed_ = true;
      break;
    }
  }
  return true;
}

bool GbnfRecognizer::same_stack(int32_t a, int32_t b) const {
  while (a != b) {
    if (a < 0 || b < 0) return false;
    const GbnfFrame& fa = arena_[a];
    const GbnfFrame& fb = arena_[b];
    if (fa.pos != fb.pos || fa.hash != fb.hash || fa.depth != fb.depth) return false;
    a = fa.parent;
    b = fb.parent;
  }
  return true;
}

size_t GbnfRecognizer::dedupe(std::vector<int32_t>& v, size_t begin) const {
  auto key = [&](int32_t s) { return s < 0 ? 0u : arena_[s].hash; };
  std::sort(v.begin() + static_cast<ptrdiff_t>(begin), v.end(),
            [&](int32_t a, int32_t b) { return key(a) != key(b) ? key(a) < key(b) : a < b; });
  size_t out = begin;
  size_t group = begin;  // first kept stack with the current hash
  for (size_t i = begin; i < v.size(); ++i) {
    if (out > begin && key(v[out - 1]) != key(v[i])) group = out;
    bool dup = false;
    for (size_t j = group; j < out && !dup; ++j) dup = same_stack(v[j], v[i]);
    if (!dup) v[out++] = v[i];
  }
  return out;
}

}  // namespace minfer::grammar
