#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <queue>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer::tokenizer {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Token texts llama.cpp treats as end-of-generation wherever they appear; the
// first kEotCandidates of them also qualify as the end-of-turn token.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",    "<|im_end|>",         "<|end|>",    "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>",    "<EOT>",      "_<EOT>",
    "<|eom_id|>",    "<end_of_utterance>", "<|return|>", "<|call|>",
};
constexpr size_t kEotCandidates = 8;
constexpr std::string_view kHarmonyEnd = "<|end|>";

// Lets the maps be probed with a string_view without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

std::string rank_key(std::string_view left, std::string_view right) {
  // 0xFF never occurs in UTF-8, so the key is unambiguous.
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key += '\xFF';
  key.append(right);
  return key;
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  bool is_bpe = false;
  bool ignore_merges = false;
  TokenMap token_to_id;
  TokenMap ranks;
  SpecialTokenSplitter special_splitter;
  std::vector<bool> eog;
  int32_t eot = -1;                     // the vocabulary's, or detected from well-known texts
  std::array<int32_t, 256> byte_ids{};  // SPM byte fallback, -1 when missing
  std::optional<RegexSplitter> splitter;

  TokenType type(int32_t id) const {
    if (vocab.token_types.empty()) return TokenType::kNormal;
    return static_cast<TokenType>(vocab.token_types[id]);
  }
  float score(int32_t id) const { return vocab.scores.empty() ? 0.0f : vocab.scores[id]; }
  int32_t lookup(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }

  void index_special_tokens();
  bool mark_harmony_tokens();
  void bpe_fragment(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_word(const std::string& word, std::vector<int32_t>& out) const;
  void spm_fragment(std::string_view text, std::vector<int32_t>& out) const;
};

// ---------------------------------------------------------------------------
// create

namespace {

Status check_id(const Vocab& v, int32_t id, const char* what) {
  if (id == -1) return Status::ok();
  if (id < 0 || id >= static_cast<int32_t>(v.tokens.size())) {
    return Status::invalid_argument(std::string(what) + " id " + std::to_string(id) +
                                    " is out of range [0, " + std::to_string(v.tokens.size()) +
                                    ")");
  }
  return Status::ok();
}

Status validate_vocab(const Vocab& v) {
  if (v.model != "gpt2" && v.model != "llama") {
    return Status::invalid_argument("unsupported tokenizer model \"" + v.model + "\"");
  }
  if (v.tokens.empty()) return Status::invalid_argument("vocabulary has no tokens");
  if (v.tokens.size() > static_cast<size_t>(INT32_MAX))
    return Status::invalid_argument("vocabulary too large");
  if (!v.scores.empty() && v.scores.size() != v.tokens.size()) {
    return Status::invalid_argument("vocabulary has " + std::to_string(v.tokens.size()) +
                                    " tokens but " + std::to_string(v.scores.size()) + " scores");
  }
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size()) {
    return Status::invalid_argument("vocabulary has " + std::to_string(v.tokens.size()) +
                                    " tokens but " + std::to_string(v.token_types.size()) +
                                    " token types");
  }
  for (size_t i = 0; i < v.token_types.size(); ++i) {
    if (v.token_types[i] < 0 || v.token_types[i] > 6) {
      return Status::invalid_argument("token " + std::to_string(i) + " has invalid type " +
                                      std::to_string(v.token_types[i]));
    }
  }
  MINFER_RETURN_IF_ERROR(check_id(v, v.bos_id, "BOS"));
  MINFER_RETURN_IF_ERROR(check_id(v, v.eos_id, "EOS"));
  MINFER_RETURN_IF_ERROR(check_id(v, v.eot_id, "EOT"));
  MINFER_RETURN_IF_ERROR(check_id(v, v.unk_id, "UNK"));
  MINFER_RETURN_IF_ERROR(check_id(v, v.pad_id, "PAD"));
  if (v.add_bos && v.bos_id < 0)
    return Status::invalid_argument("add_bos is set but there is no BOS token");
  if (v.add_eos && v.eos_id < 0)
    return Status::invalid_argument("add_eos is set but there is no EOS token");
  return Status::ok();
}

Status build_ranks(const Vocab& v, const TokenMap& ids, TokenMap& ranks) {
  ranks.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    // The separator is the first space after the first byte, so a left part
    // that is itself a space still splits correctly.
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) {
      return Status::invalid_argument("merge " + std::to_string(i) + " \"" + m +
                                      "\" has no separator");
    }
    const std::string left = m.substr(0, sp);
    const std::string right = m.substr(sp + 1);
    // The merged text need not be a token itself: llama.cpp then falls back to
    // the pieces' bytes, and so does bpe_word().
    if (!ids.contains(left) || !ids.contains(right)) {
      return Status::invalid_argument("merge " + std::to_string(i) + " \"" + m +
                                      "\" references a token that is not in the vocabulary");
    }
    ranks.emplace(rank_key(left, right), static_cast<int32_t>(i));  // first rank wins
  }
  return Status::ok();
}

}  // namespace

Result<Tokenizer> Tokenizer::create(Vocab vocab_in) {
  MINFER_RETURN_IF_ERROR(validate_vocab(vocab_in).with_context("tokenizer"));
  auto impl = std::make_shared<Impl>();
  impl->vocab = std::move(vocab_in);
  const Vocab& vocab = impl->vocab;
  impl->is_bpe = vocab.model == "gpt2";
  const int32_t n = static_cast<int32_t>(vocab.tokens.size());
  impl->token_to_id.reserve(vocab.tokens.size());
  for (int32_t id = 0; id < n; ++id) {
    if (!impl->token_to_id.emplace(vocab.tokens[id], id).second) {
      return Status::invalid_argument("token " + std::to_string(id) + " \"" + vocab.tokens[id] +
                                      "\" duplicates token " +
                                      std::to_string(impl->token_to_id[vocab.tokens[id]]));
    }
  }
  if (impl->is_bpe) {
    MINFER_RETURN_IF_ERROR(
        build_ranks(vocab, impl->token_to_id, impl->ranks).with_context("tokenizer"));
    MINFER_ASSIGN_OR_RETURN(auto patterns, pre_tokenizer_patterns(vocab.pre));
    MINFER_ASSIGN_OR_RETURN(auto splitter, RegexSplitter::create(patterns));
    impl->splitter.emplace(std::move(splitter));
    impl->ignore_merges = vocab.pre == "llama3" || vocab.pre == "llama-v3" ||
                          vocab.pre == "llama-bpe" || vocab.pre == "falcon3";
  } else {
    static const char* kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
      int32_t id = impl->lookup(name);
      if (id < 0) id = impl->lookup(std::string(1, static_cast<char>(b)));
      impl->byte_ids[b] = id;
    }
  }
  impl->index_special_tokens();
  return Tokenizer(std::move(impl));
}

// ---------------------------------------------------------------------------
// special-token partition

// End-of-generation ids and the tokens split out of raw text before
// tokenization (control, user-defined and unknown ones), longest first and
// then by id, which is the order that decides overlaps in llama.cpp.
void Tokenizer::Impl::index_special_tokens() {
  const int32_t n = static_cast<int32_t>(vocab.tokens.size());
  eog.assign(vocab.tokens.size(), false);
  eot = vocab.eot_id;
  const bool harmony = mark_harmony_tokens();
  // GGUF files rarely name an EOT token; chat models end turns with one of a
  // few well-known control tokens, earlier entries of kEogTexts preferred.
  for (size_t i = 0; i < std::size(kEogTexts); ++i) {
    // In harmony <|end|> closes one message of a reply that goes on.
    if (harmony && kEogTexts[i] == kHarmonyEnd) continue;
    auto it = token_to_id.find(kEogTexts[i]);
    if (it != token_to_id.end() && type(it->second) == TokenType::kControl) {
      eog[it->second] = true;
      if (eot < 0 && i < kEotCandidates) eot = it->second;
    }
  }
  const int32_t harmony_end = harmony ? lookup(kHarmonyEnd) : -1;
  for (int32_t id : {vocab.eos_id, eot}) {
    if (id >= 0 && id != harmony_end) eog[id] = true;
  }
  std::vector<int32_t> special_ids;
  for (int32_t id = 0; id < n; ++id) {
    const TokenType t = type(id);
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !vocab.tokens[id].empty()) {
      special_ids.push_back(id);
    }
  }
  std::stable_sort(special_ids.begin(), special_ids.end(), [&](int32_t a, int32_t b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });
  std::vector<SpecialTokenSplitter::Pattern> patterns;
  patterns.reserve(special_ids.size());
  for (int32_t id : special_ids) {
    // User-defined tokens are split out even without parse_special.
    patterns.push_back({vocab.tokens[id], id, type(id) != TokenType::kUserDefined});
  }
  special_splitter = SpecialTokenSplitter(std::move(patterns));
}

// A harmony vocabulary (gpt-oss: <|channel|>, <|return|> and <|call|>
// exist) writes its messages' structure with special tokens that the reply's
// readers must see (serve/harmony.h): they become user-defined, rendered as
// text like llama.cpp renders them. Returns whether the vocabulary is one.
bool Tokenizer::Impl::mark_harmony_tokens() {
  if (lookup("<|channel|>") < 0 || lookup("<|return|>") < 0 || lookup("<|call|>") < 0) {
    return false;
  }
  if (vocab.token_types.empty()) return true;  // all normal already
  constexpr std::string_view kStructure[] = {"<|start|>", "<|channel|>", "<|message|>",
                                             "<|constrain|>", kHarmonyEnd};
  for (std::string_view text : kStructure) {
    const int32_t id = lookup(text);
    if (id >= 0 && type(id) == TokenType::kControl) {
      vocab.token_types[id] = static_cast<int32_t>(TokenType::kUserDefined);
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// byte-level BPE

namespace {

struct Symbol {
  size_t offset;
  size_t length;  // 0 once merged into its left neighbour
  int prev;
  int next;
};

struct Bigram {
  int left;
  int right;
  int32_t rank_or_order;  // BPE: merge rank; SPM: unused
  float score;            // SPM: score of the merged token
  size_t size;            // byte length of the merged text, to detect stale entries
};

struct BpeOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    // priority_queue pops the "largest": lowest rank first, then leftmost.
    return a.rank_or_order > b.rank_or_order ||
           (a.rank_or_order == b.rank_or_order && a.left > b.left);
  }
};

struct SpmOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    // Highest score first, then leftmost.
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

std::vector<Symbol> split_chars(std::string_view word) {
  std::vector<Symbol> syms;
  size_t off = 0;
  int index = 0;
  while (off < word.size()) {
    const size_t len =
        std::min(word.size() - off, utf8_lead_length(static_cast<unsigned char>(word[off])));
    syms.push_back({off, len, index - 1, off + len == word.size() ? -1 : index + 1});
    off += len;
    ++index;
  }
  return syms;
}

// Joins the bigram's right symbol into its left one.
void merge_symbols(std::vector<Symbol>& syms, const Bigram& b) {
  Symbol& l = syms[b.left];
  Symbol& r = syms[b.right];
  l.length += r.length;
  r.length = 0;
  l.next = r.next;
  if (r.next >= 0) syms[r.next].prev = b.left;
}

bool is_stale(const std::vector<Symbol>& syms, const Bigram& b) {
  const Symbol& l = syms[b.left];
  const Symbol& r = syms[b.right];
  return l.length == 0 || r.length == 0 || l.length + r.length != b.size;
}

}  // namespace

void Tokenizer::Impl::bpe_word(const std::string& word, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    const int32_t whole = lookup(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<Symbol> syms = split_chars(word);
  std::priority_queue<Bigram, std::vector<Bigram>, BpeOrder> queue;
  auto add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view w(word);
    auto it = ranks.find(rank_key(w.substr(syms[left].offset, syms[left].length),
                                  w.substr(syms[right].offset, syms[right].length)));
    if (it == ranks.end()) return;
    queue.push({left, right, it->second, 0.0f, syms[left].length + syms[right].length});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    if (is_stale(syms, b)) continue;
    merge_symbols(syms, b);
    add(syms[b.left].prev, b.left);
    add(b.left, syms[b.left].next);
  }
  for (const Symbol& s : syms) {
    if (s.length == 0) continue;
    const std::string piece = word.substr(s.offset, s.length);
    const int32_t id = lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Unreachable with a consistent vocabulary; mirrors llama.cpp's fallback
    // of looking up the piece's bytes one by one and dropping the misses.
    for (char c : piece) {
      const int32_t bid = lookup(std::string(1, c));
      if (bid >= 0) out.push_back(bid);
    }
  }
}

void Tokenizer::Impl::bpe_fragment(std::string_view text, std::vector<int32_t>& out) const {
  for (const auto& [off, len] : splitter->split(text)) {
    std::string word;
    for (size_t i = off; i < off + len; ++i) word += byte_to_unicode(static_cast<uint8_t>(text[i]));
    bpe_word(word, out);
  }
}

// ---------------------------------------------------------------------------
// SentencePiece-style BPE

void Tokenizer::Impl::spm_fragment(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> syms = split_chars(text);
  std::priority_queue<Bigram, std::vector<Bigram>, SpmOrder> queue;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;
  auto add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string merged(text.substr(syms[left].offset, syms[left].length + syms[right].length));
    const int32_t id = lookup(merged);
    if (id < 0) return;
    queue.push({left, right, 0, score(id), merged.size()});
    rev_merge[std::move(merged)] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    if (is_stale(syms, b)) continue;
    merge_symbols(syms, b);
    add(syms[b.left].prev, b.left);
    add(b.left, syms[b.left].next);
  }
  // A symbol that is not a token is split back along the merges that built it;
  // what still is not a token falls back to byte tokens.
  auto resegment = [&](auto&& self, size_t offset, size_t length) -> void {
    const std::string piece(text.substr(offset, length));
    const int32_t id = lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge.find(piece);
    if (it == rev_merge.end()) {
      for (char c : piece) {
        const int32_t bid = byte_ids[static_cast<unsigned char>(c)];
        if (bid >= 0) {
          out.push_back(bid);
        } else if (vocab.unk_id >= 0) {
          out.push_back(vocab.unk_id);
        }
      }
      return;
    }
    const Symbol& l = syms[it->second.first];
    const Symbol& r = syms[it->second.second];
    // The halves' lengths are recovered from where they started in the text.
    self(self, offset, r.offset - l.offset);
    self(self, r.offset, offset + length - r.offset);
  };
  for (int i = 0; i != -1 && !syms.empty(); i = syms[i].next) {
    if (syms[i].length > 0) resegment(resegment, syms[i].offset, syms[i].length);
  }
}

// ---------------------------------------------------------------------------
// public API

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special,
                                               bool parse_special) const {
  const Impl& im = *impl_;
  const size_t bad = find_invalid_utf8(text);
  if (bad != kUtf8Valid) {
    return Status::invalid_argument("invalid UTF-8 at byte offset " + std::to_string(bad));
  }
  std::vector<int32_t> out;
  const bool add_bos = add_special && im.vocab.add_bos;
  if (add_bos) out.push_back(im.vocab.bos_id);
  const std::vector<TextFragment> frags = im.special_splitter.split(text, parse_special);
  bool prev_special = true;  // SPM: a space prefix goes before the first run
  for (const TextFragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view run = text.substr(f.offset, f.length);
    if (im.is_bpe) {
      im.bpe_fragment(run, out);
      continue;
    }
    std::string escaped = (im.vocab.add_space_prefix && prev_special) ? std::string(kSpmSpace) : "";
    for (char c : run) {
      if (c == ' ') {
        escaped += kSpmSpace;
      } else {
        escaped += c;
      }
    }
    im.spm_fragment(escaped, out);
    prev_special = false;
  }
  if (add_special && im.vocab.add_eos) out.push_back(im.vocab.eos_id);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& im = *impl_;
  if (id < 0 || id >= n_vocab()) return "";
  const std::string& text = im.vocab.tokens[id];
  switch (im.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? text : "";
    case TokenType::kUserDefined:
      return text;
    case TokenType::kNormal:
      break;
    case TokenType::kByte:
      if (!im.is_bpe && text.size() == 6 && text.starts_with("<0x") && text.back() == '>') {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      return "";
    default:
      return "";
  }
  std::string out;
  if (im.is_bpe) {
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      uint8_t b;
      if (unicode_to_byte(decode_utf8(text, pos), b)) {
        out += static_cast<char>(b);
      } else {
        out.append(text, start, pos - start);  // not in the alphabet: keep as is
      }
    }
    return out;
  }
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kSpmSpace.size(), kSpmSpace) == 0) {
      out += ' ';
      pos += kSpmSpace.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, render_special);
  return out;
}

std::vector<TextFragment> Tokenizer::split_special(std::string_view text,
                                                   bool parse_special) const {
  return impl_->special_splitter.split(text, parse_special);
}

int32_t Tokenizer::n_vocab() const {
  return static_cast<int32_t>(impl_->vocab.tokens.size());
}
int32_t Tokenizer::bos() const {
  return impl_->vocab.bos_id;
}
int32_t Tokenizer::eos() const {
  return impl_->vocab.eos_id;
}
int32_t Tokenizer::eot() const {
  return impl_->eot;
}
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[id];
}
TokenType Tokenizer::token_type(int32_t id) const {
  return id >= 0 && id < n_vocab() ? impl_->type(id) : TokenType::kUndefined;
}
const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < n_vocab() ? impl_->vocab.tokens[id] : kEmpty;
}
int32_t Tokenizer::find_token(std::string_view text) const {
  return impl_->lookup(text);
}
const Vocab& Tokenizer::vocab() const {
  return impl_->vocab;
}

// ---------------------------------------------------------------------------
// Detokenizer

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Moves every complete or ill-formed sequence from `pending` to the result;
// leaves a valid-but-incomplete tail in `pending` unless `final`.
std::string drain(std::string& pending, bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    const int n = utf8_sequence_status(std::string_view(pending).substr(pos));
    if (n > 0) {
      out.append(pending, pos, static_cast<size_t>(n));
      pos += static_cast<size_t>(n);
    } else if (n == 0 || final) {
      out += kReplacement;
      pos += n == 0 ? 1 : pending.size() - pos;
    } else {
      break;
    }
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace

std::string Detokenizer::push(int32_t id) {
  pending_ += tokenizer_.token_to_piece(id, render_special_);
  return drain(pending_, false);
}

std::string Detokenizer::flush() {
  return drain(pending_, true);
}

}  // namespace minfer::tokenizer
