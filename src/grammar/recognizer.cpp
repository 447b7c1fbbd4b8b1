#include "grammar/recognizer.h"

#include <algorithm>

namespace minfer::grammar {
namespace {

constexpr uint8_t kWsNewline = 0x80;

bool is_digit(uint8_t b) {
  return b >= '0' && b <= '9';
}

int hex_value(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

// UTF-8 well-formedness, one byte at a time. `aux` holds the continuation
// bytes still expected (low 2 bits) and the range the next one must fall in
// (the rest): 0 80..BF, 1 A0..BF (after E0: no overlongs), 2 80..9F (after
// ED: no surrogates), 3 90..BF (after F0), 4 80..8F (after F4: <= U+10FFFF).
enum class Utf8Step { kReject, kLead, kContinuation };

Utf8Step utf8_step(uint8_t& aux, uint8_t byte) {
  const int pending = aux & 3;
  if (pending > 0) {
    static constexpr uint8_t kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
    static constexpr uint8_t kHi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    const int range = aux >> 2;
    if (byte < kLo[range] || byte > kHi[range]) return Utf8Step::kReject;
    aux = static_cast<uint8_t>(pending - 1);
    return Utf8Step::kContinuation;
  }
  if (byte >= 0xC2 && byte <= 0xDF) {
    aux = 1;
  } else if (byte == 0xE0) {
    aux = 2 | (1 << 2);
  } else if (byte == 0xED) {
    aux = 2 | (2 << 2);
  } else if (byte >= 0xE1 && byte <= 0xEF) {
    aux = 2;
  } else if (byte == 0xF0) {
    aux = 3 | (3 << 2);
  } else if (byte >= 0xF1 && byte <= 0xF3) {
    aux = 3;
  } else if (byte == 0xF4) {
    aux = 3 | (4 << 2);
  } else {
    return Utf8Step::kReject;
  }
  return Utf8Step::kLead;
}

bool counts_length(const Node& n) {
  return n.min_length > 0 || n.max_length != kUnbounded;
}

bool number_accepting(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExpDigits;
}

// A hash of the stack `f` tops: its fields mixed into its parent's hash, so
// that equal stacks hash equal wherever they sit in the arena.
uint32_t stack_hash(const Frame& f, uint32_t parent_hash) {
  uint64_t h = parent_hash;
  auto mix = [&h](uint64_t v) {
    h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  };
  mix(static_cast<uint32_t>(f.node));
  mix((static_cast<uint64_t>(static_cast<uint32_t>(f.a)) << 32) | static_cast<uint32_t>(f.b));
  mix((static_cast<uint64_t>(static_cast<uint32_t>(f.c)) << 32) | f.depth);
  mix(static_cast<uint64_t>(f.kind) | (uint64_t{f.phase} << 8) | (uint64_t{f.ws} << 16) |
      (uint64_t{f.aux} << 24));
  return static_cast<uint32_t>(h >> 32);
}

}  // namespace

int32_t Recognizer::push(const Frame& f) {
  arena_.push_back(f);
  Frame& top = arena_.back();
  top.hash = stack_hash(top, top.parent >= 0 ? arena_[top.parent].hash : 0);
  return static_cast<int32_t>(arena_.size()) - 1;
}

int32_t Recognizer::start(int32_t node) {
  Frame root;
  root.kind = FrameKind::kRoot;
  root.node = node;
  root.phase = kRootBefore;
  return push(root);
}

int32_t Recognizer::finished(int32_t parent) {
  Frame f = arena_[parent];
  f.ws = 0;
  switch (f.kind) {
    case FrameKind::kRoot:
      f.phase = kRootDone;
      break;
    case FrameKind::kObject:
      if (f.phase == kObjInExtraKey) {
        f.phase = kObjColon;
        f.b = -1;
      } else {
        f.phase = kObjAfterValue;
        if (f.b >= 0) f.a = f.b + 1;
      }
      break;
    case FrameKind::kArray:
      f.phase = kArrAfterItem;
      ++f.a;
      break;
    default:
      break;  // strings, numbers and literals are never parents
  }
  return push(f);
}

bool Recognizer::take_ws(Frame& f, uint8_t byte) const {
  if (byte == '\n' && f.ws == 0) {
    f.ws = kWsNewline;
    return true;
  }
  if (byte == ' ' && (f.ws & ~kWsNewline) < kMaxIndentSpaces) {
    ++f.ws;
    return true;
  }
  return false;
}

void Recognizer::enter(int32_t node_id, uint8_t byte, int32_t parent, uint16_t depth,
                       std::vector<int32_t>& out) {
  const Node& n = g_.node(node_id);
  Frame f;
  f.parent = parent;
  f.node = node_id;
  f.depth = depth;
  switch (n.kind) {
    case NodeKind::kUnion:
      for (int32_t alt : n.alternatives) enter(alt, byte, parent, depth, out);
      return;
    case NodeKind::kObject:
    case NodeKind::kArray:
      // min_nesting >= 1 counts this value's own level.
      if (byte != (n.kind == NodeKind::kObject ? '{' : '[') ||
          depth + n.min_nesting > kMaxNesting) {
        return;
      }
      f.kind = n.kind == NodeKind::kObject ? FrameKind::kObject : FrameKind::kArray;
      f.phase = n.kind == NodeKind::kObject ? uint8_t{kObjAfterOpen} : uint8_t{kArrAfterOpen};
      f.depth = static_cast<uint16_t>(depth + 1);
      return emit(f, out);
    case NodeKind::kString:
      if (byte != '"') return;
      f.kind = FrameKind::kString;
      f.phase = kStrChars;
      return emit(f, out);
    case NodeKind::kNumber:
    case NodeKind::kInteger:
      f.kind = FrameKind::kNumber;
      if (byte == '-') {
        f.phase = kNumMinus;
      } else if (byte == '0') {
        f.phase = kNumZero;
      } else if (byte >= '1' && byte <= '9') {
        f.phase = kNumInt;
      } else {
        return;
      }
      f.a = byte == '-' ? 0 : 1;
      return emit(f, out);
    case NodeKind::kLiteral:
      if (n.text.empty() || static_cast<uint8_t>(n.text[0]) != byte) return;
      if (n.text.size() == 1) return out.push_back(finished(parent));
      f.kind = FrameKind::kLiteral;
      f.a = 1;
      return emit(f, out);
  }
}

void Recognizer::step(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  switch (arena_[s].kind) {
    case FrameKind::kRoot:
      return step_root(s, byte, out);
    case FrameKind::kObject:
      return step_object(s, byte, out);
    case FrameKind::kArray:
      return step_array(s, byte, out);
    case FrameKind::kString:
      return step_string(s, byte, out);
    case FrameKind::kExtraKey:
      return step_extra_key(s, byte, out);
    case FrameKind::kNumber:
      return step_number(s, byte, out);
    case FrameKind::kLiteral: {
      const Frame f = arena_[s];
      const std::string& text = g_.node(f.node).text;
      if (static_cast<uint8_t>(text[f.a]) != byte) return;
      if (f.a + 1 == static_cast<int32_t>(text.size())) return out.push_back(finished(f.parent));
      Frame next = f;
      ++next.a;
      return emit(next, out);
    }
  }
}

void Recognizer::step_root(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  Frame f = arena_[s];
  if (f.phase != kRootBefore) return;  // nothing follows the top-level value
  if (take_ws(f, byte)) return emit(f, out);
  f.phase = kRootInValue;
  f.ws = 0;
  const int32_t waiting = push(f);
  enter(f.node, byte, waiting, 0, out);
}

bool Recognizer::fits(int32_t node, int32_t depth) const {
  return node >= 0 && depth + g_.node(node).min_nesting <= kMaxNesting;
}

bool Recognizer::may_continue(const Frame& f) const {
  const Node& n = g_.node(f.node);
  const int32_t n_props = static_cast<int32_t>(n.properties.size());
  if (n.next_required[f.a] < n_props || fits(n.additional, f.depth)) return true;
  for (int32_t i = f.a; i < n_props; ++i) {
    if (fits(n.properties[i].value, f.depth)) return true;
  }
  return false;
}

void Recognizer::start_key(const Frame& f, std::vector<int32_t>& out) {
  const Node& n = g_.node(f.node);
  const int32_t n_props = static_cast<int32_t>(n.properties.size());
  // Optional properties may be skipped, up to and including the next required one;
  // one whose value needs more nesting than is left is never started (a
  // required one always fits: the object's own min_nesting counted it).
  const int32_t last = std::min(n.next_required[f.a], n_props - 1);
  for (int32_t i = f.a; i <= last; ++i) {
    if (!fits(n.properties[i].value, f.depth)) continue;
    Frame key = f;
    key.phase = kObjInKey;
    key.b = i;
    key.c = 0;
    key.ws = 0;
    emit(key, out);
  }
  if (!fits(n.additional, f.depth)) return;
  Frame waiting = f;
  waiting.phase = kObjInExtraKey;
  waiting.ws = 0;
  Frame key;
  key.parent = push(waiting);
  key.node = f.node;
  key.kind = FrameKind::kExtraKey;
  key.b = static_cast<int32_t>(n.sorted_names.size());
  key.depth = f.depth;
  emit(key, out);
}

void Recognizer::step_object(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  Frame f = arena_[s];
  const Node& n = g_.node(f.node);
  const int32_t n_props = static_cast<int32_t>(n.properties.size());
  const bool may_close = n.next_required[f.a] == n_props;
  if (f.phase != kObjInKey && take_ws(f, byte)) return emit(f, out);
  f.ws = 0;
  switch (f.phase) {
    case kObjAfterOpen:
      if (byte == '}' && may_close) return out.push_back(finished(f.parent));
      if (byte == '"') return start_key(f, out);
      return;
    case kObjAfterComma:
      if (byte == '"') return start_key(f, out);
      return;
    case kObjInKey: {
      const std::string& key = n.properties[f.b].key_text;
      if (static_cast<uint8_t>(key[f.c]) != byte) return;
      if (++f.c == static_cast<int32_t>(key.size())) {
        f.phase = kObjColon;
        f.c = 0;
      }
      return emit(f, out);
    }
    case kObjColon:
      if (byte != ':') return;
      f.phase = kObjBeforeValue;
      return emit(f, out);
    case kObjBeforeValue: {
      const int32_t value = f.b >= 0 ? n.properties[f.b].value : n.additional;
      f.phase = kObjInValue;
      const int32_t waiting = push(f);
      return enter(value, byte, waiting, f.depth, out);
    }
    case kObjAfterValue:
      if (byte == ',' && may_continue(f)) {
        f.phase = kObjAfterComma;
        return emit(f, out);
      }
      if (byte == '}' && may_close) return out.push_back(finished(f.parent));
      return;
    default:
      return;  // waiting phases are never on top
  }
}

void Recognizer::step_array(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  Frame f = arena_[s];
  const Node& n = g_.node(f.node);
  if (take_ws(f, byte)) return emit(f, out);
  f.ws = 0;
  switch (f.phase) {
    case kArrAfterOpen:
      if (byte == ']' && n.min_items == 0) return out.push_back(finished(f.parent));
      if (n.max_items == 0 || !fits(n.item_node(0), f.depth)) return;
      [[fallthrough]];
    case kArrAfterComma: {
      f.phase = kArrInItem;
      const int32_t item = n.item_node(f.a);
      const int32_t waiting = push(f);
      return enter(item, byte, waiting, f.depth, out);
    }
    case kArrAfterItem:
      if (byte == ',' && f.a < n.max_items && fits(n.item_node(f.a), f.depth)) {
        f.phase = kArrAfterComma;
        return emit(f, out);
      }
      if (byte == ']' && f.a >= n.min_items) return out.push_back(finished(f.parent));
      return;
    default:
      return;
  }
}

void Recognizer::step_string(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  Frame f = arena_[s];
  const Node& n = g_.node(f.node);
  const bool counted = counts_length(n);
  const bool room = !counted || f.a < n.max_length;
  switch (f.phase) {
    case kStrChars:
      if (f.aux != 0) {
        if (utf8_step(f.aux, byte) == Utf8Step::kReject) return;
        return emit(f, out);
      }
      if (byte == '"') {
        if (!counted || f.a >= n.min_length) out.push_back(finished(f.parent));
        return;
      }
      if (byte < 0x20 || !room) return;
      if (byte == '\\') {
        f.phase = kStrEscape;
      } else if (byte >= 0x80 && utf8_step(f.aux, byte) == Utf8Step::kReject) {
        return;
      }
      if (!counted && f.phase == kStrChars && f.aux == 0) return out.push_back(s);  // unchanged
      if (counted) ++f.a;
      return emit(f, out);
    case kStrEscape:
      if (byte == 'u') {
        f.phase = kStrHex;
        f.aux = 0;
        f.b = 0;
      } else if (byte == '"' || byte == '\\' || byte == '/' || byte == 'b' || byte == 'f' ||
                 byte == 'n' || byte == 'r' || byte == 't') {
        f.phase = kStrChars;
      } else {
        return;
      }
      return emit(f, out);
    case kStrPairEscape:
      if (byte != '\\') return;
      f.phase = kStrPairU;
      return emit(f, out);
    case kStrPairU:
      if (byte != 'u') return;
      f.phase = kStrPairHex;
      f.aux = 0;
      f.b = 0;
      return emit(f, out);
    case kStrHex:
    case kStrPairHex:
      return step_hex(f, byte, out);
    default:
      return;
  }
}

// One digit of a \uXXXX escape (kStrHex) or of the low surrogate after a
// high one (kStrPairHex); f.aux counts the digits, f.b accumulates them.
void Recognizer::step_hex(Frame f, uint8_t byte, std::vector<int32_t>& out) {
  const int v = hex_value(byte);
  if (v < 0) return;
  // Reject a digit as soon as no completion is valid: a low surrogate
  // (DC..DF) cannot stand alone, and one must follow a high surrogate.
  if (f.phase == kStrHex && f.aux == 1 && f.b == 0xD && v >= 0xC) return;
  if (f.phase == kStrPairHex && ((f.aux == 0 && v != 0xD) || (f.aux == 1 && v < 0xC))) return;
  f.b = f.b * 16 + v;
  if (++f.aux < 4) return emit(f, out);
  f.aux = 0;
  const bool high = f.b >= 0xD800 && f.b <= 0xDBFF;
  const bool low = f.b >= 0xDC00 && f.b <= 0xDFFF;
  if (f.phase == kStrPairHex) {
    if (!low) return;
    f.phase = kStrChars;
  } else if (low) {
    return;  // a low surrogate with no high one before it
  } else {
    f.phase = high ? kStrPairEscape : kStrChars;
  }
  f.b = 0;
  return emit(f, out);
}

void Recognizer::step_extra_key(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  Frame f = arena_[s];
  const std::vector<std::string>& names = g_.node(f.node).sorted_names;
  if (f.aux != 0) {
    if (utf8_step(f.aux, byte) == Utf8Step::kReject) return;
  } else if (byte == '"') {
    // A key equal to a declared name must go through that property's schema.
    if (f.a < f.b && static_cast<int32_t>(names[f.a].size()) == f.c) return;
    return out.push_back(finished(f.parent));
  } else if (byte < 0x20 || byte == '\\') {
    return;  // additional keys are written without escapes
  } else if (byte >= 0x80 && utf8_step(f.aux, byte) == Utf8Step::kReject) {
    return;
  }
  if (f.a < f.b) {
    // Narrow the (sorted, contiguous) declared names that share this prefix.
    int32_t lo = f.a;
    while (lo < f.b && (static_cast<int32_t>(names[lo].size()) <= f.c ||
                        static_cast<uint8_t>(names[lo][f.c]) < byte)) {
      ++lo;
    }
    int32_t hi = lo;
    while (hi < f.b && static_cast<uint8_t>(names[hi][f.c]) == byte) ++hi;
    f.a = lo;
    f.b = hi;
    ++f.c;
    if (lo >= hi) f.a = f.b = f.c = 0;  // no declared name left: a plain string
  } else if (f.aux == 0 && arena_[s].aux == 0) {
    return out.push_back(s);  // unchanged
  }
  return emit(f, out);
}

void Recognizer::step_number(int32_t s, uint8_t byte, std::vector<int32_t>& out) {
  Frame f = arena_[s];
  const bool integer = g_.node(f.node).kind == NodeKind::kInteger;
  const bool digit = is_digit(byte);
  const bool can_fraction = !integer && (f.phase == kNumZero || f.phase == kNumInt);
  const bool can_exponent = can_fraction || f.phase == kNumFrac;
  uint8_t next = 0xFF;
  const int32_t limit = f.phase == kNumInt    ? kMaxIntegerDigits
                        : f.phase == kNumFrac ? kMaxFractionDigits
                                              : kMaxExponentDigits;
  if (f.phase == kNumMinus && digit) {
    next = byte == '0' ? kNumZero : kNumInt;
  } else if (digit && (f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExpDigits)) {
    if (f.a >= limit) return;  // the digit cannot follow, nor start what comes after
    ++f.a;
    return emit(f, out);
  } else if (digit && f.phase == kNumDot) {
    next = kNumFrac;
  } else if (digit && (f.phase == kNumExp || f.phase == kNumExpSign)) {
    next = kNumExpDigits;
  } else if (byte == '.' && can_fraction) {
    next = kNumDot;
  } else if ((byte == 'e' || byte == 'E') && can_exponent) {
    next = kNumExp;
  } else if ((byte == '+' || byte == '-') && f.phase == kNumExp) {
    next = kNumExpSign;
  }
  if (next != 0xFF) {
    f.phase = next;
    f.a = digit ? 1 : 0;  // digits of the part just begun
    return emit(f, out);
  }
  // The number ends here; the byte belongs to whatever follows it.
  if (number_accepting(f.phase)) step(finished(f.parent), byte, out);
}

bool state_can_end(const std::vector<Frame>& arena, int32_t s) {
  const Frame& f = arena[s];
  if (f.kind == FrameKind::kRoot) return f.phase == kRootDone;
  return f.kind == FrameKind::kNumber && number_accepting(f.phase) &&
         arena[f.parent].kind == FrameKind::kRoot;
}

bool Recognizer::can_end(int32_t s) const {
  return state_can_end(arena_, s);
}

bool Recognizer::is_free_string(int32_t s, int64_t& capacity) const {
  const Frame& f = arena_[s];
  if (f.kind == FrameKind::kString && f.phase == kStrChars && f.aux == 0) {
    const Node& n = g_.node(f.node);
    capacity = n.max_length == kUnbounded ? kUnbounded : n.max_length - f.a;
    return true;
  }
  if (f.kind == FrameKind::kExtraKey && f.aux == 0 && f.a >= f.b) {
    capacity = kUnbounded;
    return true;
  }
  return false;
}

bool Recognizer::same_stack(int32_t x, int32_t y) const {
  while (x != y) {
    if (x < 0 || y < 0 || !arena_[x].same_fields(arena_[y])) return false;
    x = arena_[x].parent;
    y = arena_[y].parent;
  }
  return true;
}

size_t Recognizer::dedupe(std::vector<int32_t>& out, size_t begin) const {
  const size_t n = out.size() - begin;
  constexpr size_t kPairwise = 16;  // below this, comparing all pairs is cheaper than sorting
  size_t kept = begin;
  if (n <= kPairwise) {
    for (size_t i = begin; i < out.size(); ++i) {
      bool seen = false;
      for (size_t j = begin; j < kept && !seen; ++j) seen = same_stack(out[i], out[j]);
      if (!seen) out[kept++] = out[i];
    }
    return kept;
  }
  // Sort positions by stack hash; only equal hashes can be equal stacks.
  std::vector<std::pair<uint32_t, uint32_t>> order(n);  // (hash, position)
  for (size_t i = 0; i < n; ++i) {
    order[i] = {arena_[out[begin + i]].hash, static_cast<uint32_t>(i)};
  }
  std::sort(order.begin(), order.end());
  std::vector<uint8_t> drop(n, 0);
  for (size_t g = 0; g < n;) {
    size_t end = g + 1;
    while (end < n && order[end].first == order[g].first) ++end;
    for (size_t i = g + 1; i < end; ++i) {  // each against the earlier kept ones of its group
      const int32_t s = out[begin + order[i].second];
      for (size_t j = g; j < i; ++j) {
        if (!drop[order[j].second] && same_stack(s, out[begin + order[j].second])) {
          drop[order[i].second] = 1;
          break;
        }
      }
    }
    g = end;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!drop[i]) out[kept++] = out[begin + i];
  }
  return kept;
}

bool matches(const JsonGrammar& grammar, int32_t node, std::string_view text) {
  std::vector<Frame> arena;
  Recognizer r(grammar, arena);
  std::vector<int32_t> states = {r.start(node)};
  std::vector<int32_t> next;
  for (char ch : text) {
    next.clear();
    for (int32_t s : states) r.step(s, static_cast<uint8_t>(ch), next);
    next.resize(r.dedupe(next, 0));
    states.swap(next);
    if (states.empty()) return false;
  }
  return std::any_of(states.begin(), states.end(), [&](int32_t s) { return r.can_end(s); });
}

}  // namespace minfer::grammar
