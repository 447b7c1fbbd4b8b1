#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace minfer::tokenizer {

namespace {

// llama.cpp's notion of whitespace. PCRE2's \s (with UCP) also matches
// U+180E, which llama.cpp treats as a format character; spelling the class out
// keeps the two in agreement.
constexpr const char* kWs =
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

std::string ws_class() {
  return std::string("[") + kWs + "]";
}
std::string non_ws_class() {
  return std::string("[^") + kWs + "]";
}

// The common shape of the Qwen2 and Llama 3 patterns; they differ only in how
// many digits one piece may hold.
std::string qwen_llama3_pattern(const std::string& digits) {
  const std::string s = ws_class();
  return "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
         "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
         "|" +
         digits + "| ?[^" + kWs +
         "\\p{L}\\p{N}]+[\\r\\n]*"
         "|" +
         s +
         "*[\\r\\n]+"
         "|" +
         s + "+(?!" + non_ws_class() +
         ")"
         "|" +
         s + "+";
}

// OpenAI's o200k pattern (GPT-4o, gpt-oss), with whitespace as above. Letter
// runs are case-aware: an upper-case run ends where a lower-case run starts a
// new word ("HelloWorld" is two pieces), and a contraction is the suffix of
// the word before it rather than a piece of its own. llama.cpp rewrites the
// letter classes for its regex engine so that a letter outside ASCII is both
// upper and lower case and a combining mark neither; this is the model's own
// pattern, which splits such text differently (docs/PARITY.md, "Tokenizers").
std::string o200k_pattern() {
  const std::string upper = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]";
  const std::string lower = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]";
  const std::string lead = "[^\\r\\n\\p{L}\\p{N}]?";
  const std::string contraction = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?";
  const std::string s = ws_class();
  return lead + upper + "*" + lower + "+" + contraction + "|" + lead + upper + "+" + lower + "*" +
         contraction + "|\\p{N}{1,3}| ?[^" + kWs + "\\p{L}\\p{N}]+[\\r\\n/]*|" + s + "*[\\r\\n]+|" +
         s + "+(?!" + non_ws_class() + ")|" + s + "+";
}

}  // namespace

Result<std::vector<std::string>> pre_tokenizer_patterns(const std::string& pre) {
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "megrez") {
    return std::vector<std::string>{qwen_llama3_pattern("\\p{N}")};
  }
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3") {
    return std::vector<std::string>{qwen_llama3_pattern("\\p{N}{1,3}")};
  }
  if (pre == "gpt-4o" || pre == "llama4") {
    return std::vector<std::string>{o200k_pattern()};
  }
  if (pre == "default" || pre.empty()) {
    return std::vector<std::string>{
        "[\\p{P}\\$\\+<=>\\^~\\|]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + std::string(kWs) + "\\p{L}\\p{N}]+|" +
            ws_class() + "+(?!" + non_ws_class() + ")",
        "\\p{N}+",
        "[0-9][0-9][0-9]",
    };
  }
  return Status::invalid_argument("unsupported pre-tokenizer \"" + pre + "\"");
}

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Result<RegexSplitter> RegexSplitter::create(const std::vector<std::string>& patterns) {
  std::vector<std::shared_ptr<const Compiled>> compiled;
  for (const std::string& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      return Status::invalid_argument("regex \"" + p + "\" at offset " + std::to_string(err_off) +
                                      ": " + reinterpret_cast<const char*>(buf));
    }
    // JIT is only a speed-up; the interpreter gives the same matches.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto c = std::make_shared<Compiled>();
    c->code = code;
    compiled.push_back(std::move(c));
  }
  return RegexSplitter(std::move(compiled));
}

void RegexSplitter::split_one(const Compiled& re, std::string_view text, size_t base, size_t length,
                              std::vector<std::pair<size_t, size_t>>& out) const {
  // Each piece is matched as its own subject so that lookaheads see the piece
  // end as the end of text, as llama.cpp's splitter does.
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + base);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re.code, nullptr);
  size_t pos = 0;
  size_t gap_start = 0;
  while (pos < length) {
    const int rc = pcre2_match(re.code, subject, length, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t start = ov[0];
    size_t end = ov[1];
    if (end == start) {
      // Empty matches split nothing; step over one character and go on.
      pos = start + 1;
      while (pos < length && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > gap_start) out.emplace_back(base + gap_start, start - gap_start);
    out.emplace_back(base + start, end - start);
    pos = end;
    gap_start = end;
  }
  if (gap_start < length) out.emplace_back(base + gap_start, length - gap_start);
  pcre2_match_data_free(md);
}

std::vector<std::pair<size_t, size_t>> RegexSplitter::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(0, text.size());
  for (const auto& re : compiled_) {
    std::vector<std::pair<size_t, size_t>> next;
    next.reserve(pieces.size() * 2);
    for (const auto& [off, len] : pieces) split_one(*re, text, off, len, next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace minfer::tokenizer
