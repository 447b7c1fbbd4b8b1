#include "grammar_testutil.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace minfer::grammar::testing {
namespace {

using nlohmann::ordered_json;

std::shared_ptr<const TokenVocabulary> make(std::vector<TokenInfo> tokens) {
  tokens.push_back({"", /*is_eog=*/true, /*is_special=*/true});
  tokens.push_back({"<|special|>", false, true});
  auto v = TokenVocabulary::create(std::move(tokens));
  return v.is_ok() ? *v : nullptr;
}

const std::vector<std::string>& structural_tokens() {
  static const std::vector<std::string> k = {"\": \"",
                                             "\"},{\"",
                                             "\", \"",
                                             "{\"",
                                             "\"}",
                                             "[{\"",
                                             "}]",
                                             "\":",
                                             ",\"",
                                             "\"]",
                                             "[\"",
                                             "true",
                                             "false",
                                             "null",
                                             "name",
                                             "age",
                                             " the",
                                             "\xC3\xA9",
                                             "\xE6\xBC\xA2\xE5\xAD\x97",
                                             "\xE6\xBC",
                                             "\xA2",
                                             "\xF0\x9F",
                                             "\x98\x80",
                                             "\xF0\x9F\x98\x80",
                                             "12",
                                             "0.",
                                             "e+",
                                             "-1",
                                             "\\n",
                                             "\\u00",
                                             "e9",
                                             "\\\"",
                                             "\\uD83D",
                                             "\\uDE00",
                                             "\n  ",
                                             "  ",
                                             "\n",
                                             "    ",
                                             "{}",
                                             "[]",
                                             "\"\"",
                                             "\"a",
                                             "b\"",
                                             "tags",
                                             "\"name\": \"",
                                             "}}",
                                             "]]",
                                             "\xC3",
                                             "\xA9",
                                             ", ",
                                             ": ",
                                             "1}",
                                             "\"red\"",
                                             "\"green\"",
                                             "\"blue\"",
                                             "\"kind\": \"",
                                             "child",
                                             "ren",
                                             "value"};
  return k;
}

// Substrings of sample JSON texts, cut at seeded random places.
std::vector<std::string> cut_samples() {
  const std::vector<std::string> samples = {
      R"({"name": "Ada", "age": 36, "tags": ["x", "y"], "ok": true, "none": null})",
      R"([{"a": [1, 2.5e-3, -0]}, {"b": {"c": "d\"e\\f\u00e9\n"}}, false])",
      "{\n  \"color\": \"green\",\n  \"children\": [\n    {\"value\": 12}\n  ]\n}",
      "{\"kind\":\"leaf\",\"label\":\"caf\xC3\xA9 \xE6\xBC\xA2 \xF0\x9F\x98\x80\",\"n\":-7}"};
  std::mt19937_64 rng(1234);
  std::vector<std::string> out;
  for (const std::string& s : samples) {
    for (size_t pos = 0; pos < s.size();) {
      const size_t len = 1 + rng() % 6;
      out.push_back(s.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  std::vector<TokenInfo> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back({std::string(1, static_cast<char>(b))});
  return make(std::move(tokens));
}

std::shared_ptr<const TokenVocabulary> multi_byte_vocabulary(int which) {
  std::vector<TokenInfo> tokens;
  if (which == 0) {
    for (int b = 0; b < 256; ++b) tokens.push_back({std::string(1, static_cast<char>(b))});
    for (const std::string& t : structural_tokens()) tokens.push_back({t});
  } else {
    // Every byte a JSON text may need on its own (printable ASCII, '\n', UTF-8
    // leads and continuations), as real vocabularies have through byte
    // fallback: mask() looks one token ahead only.
    for (int b = 0x20; b < 0xF5; ++b) {
      if (b != 0x7F) tokens.push_back({std::string(1, static_cast<char>(b))});
    }
    tokens.push_back({"\n"});
    for (const std::string& t : cut_samples()) tokens.push_back({t});
    for (const char* t : {"\xC3\xA9", "\xE6\xBC", "\xA2", "\xF0\x9F\x98", "\x80"}) {
      tokens.push_back({t});
    }
  }
  return make(std::move(tokens));
}

int first_rejected_byte(JsonConstraint& c, const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!c.accept(static_cast<uint8_t>(text[i])).is_ok()) return static_cast<int>(i);
  }
  return -1;
}

bool accepts_whole(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  auto c = JsonConstraint::create(g, byte_vocabulary());
  if (!c.is_ok() || first_rejected_byte(*c, text) >= 0 || !c->complete()) return false;
  return c->accept(kByteEog).is_ok();
}

WalkResult random_walk(const std::shared_ptr<const JsonGrammar>& g,
                       const std::shared_ptr<const TokenVocabulary>& vocab, uint64_t seed,
                       int max_steps, int close_after) {
  WalkResult out;
  auto c = JsonConstraint::create(g, vocab);
  if (!c.is_ok()) {
    out.error = c.message();
    return out;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> logits(static_cast<size_t>(vocab->size()));
  std::vector<uint8_t> allowed;
  for (; out.steps < max_steps && !c->ended(); ++out.steps) {
    for (float& l : logits) l = uniform(rng);
    out.text = c->text();
    Status s = c->mask(logits);
    if (!s.is_ok()) {
      out.error = s.message();
      return out;
    }
    int32_t pick =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (out.steps >= close_after) {
      std::vector<int32_t> closing;
      for (int32_t t = 0; t < vocab->size(); ++t) {
        if (logits[t] == -std::numeric_limits<float>::infinity()) continue;
        if (vocab->token(t).is_eog) {
          closing.assign(1, t);
          break;
        }
        const std::string& b = vocab->token(t).bytes;
        if (b.find_first_of("\"}]0123456789") != std::string::npos) closing.push_back(t);
      }
      if (!closing.empty() && (closing.size() == 1 || rng() % 10 != 0)) {
        pick = closing[rng() % closing.size()];
      }
    }
    s = c->accept(pick);
    if (!s.is_ok()) {
      out.error = "mask allowed a token accept refused: " + s.message();
      return out;
    }
  }
  out.text = c->text();
  out.reached_eog = c->ended();
  return out;
}

namespace {

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<uint8_t>(ch) & 0xC0) != 0x80;
  return n;
}

bool has_type(const ordered_json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer()) return true;
    return v.is_number_float() && std::isfinite(v.get<double>()) &&
           std::trunc(v.get<double>()) == v.get<double>();
  }
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

std::string validate_object(const ordered_json& v, const ordered_json& s,
                            const ordered_json& root) {
  const ordered_json props = s.value("properties", ordered_json::object());
  for (const auto& [key, value] : v.items()) {
    if (props.contains(key)) {
      std::string e = validate(value, props[key], root);
      if (!e.empty()) return "/" + key + ": " + e;
    } else if (s.contains("additionalProperties")) {
      std::string e = validate(value, s["additionalProperties"], root);
      if (!e.empty()) return "/" + key + " (additional): " + e;
    } else if (s.contains("properties")) {
      return "additional property \"" + key + "\"";
    }
  }
  for (const ordered_json& r : s.value("required", ordered_json::array())) {
    if (!v.contains(r.get<std::string>())) return "missing required " + r.dump();
  }
  return "";
}

std::string validate_array(const ordered_json& v, const ordered_json& s, const ordered_json& root) {
  const ordered_json prefix = s.value("prefixItems", ordered_json::array());
  for (size_t i = 0; i < v.size(); ++i) {
    const ordered_json* sub = nullptr;
    if (i < prefix.size()) {
      sub = &prefix[i];
    } else if (s.contains("items")) {
      sub = &s["items"];
    }
    if (sub == nullptr) continue;
    std::string e = validate(v[i], *sub, root);
    if (!e.empty()) return "/" + std::to_string(i) + ": " + e;
  }
  if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "too few items";
  if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "too many items";
  return "";
}

}  // namespace

std::string validate(const ordered_json& v, const ordered_json& s, const ordered_json& root) {
  if (s.is_boolean()) return s.get<bool>() ? "" : "false schema";
  if (s.contains("$ref")) {
    const std::string ptr = s["$ref"].get<std::string>().substr(1);
    return validate(v, ptr.empty() ? root : root.at(ordered_json::json_pointer(ptr)), root);
  }
  if (s.contains("allOf")) {
    for (const ordered_json& sub : s["allOf"]) {
      std::string e = validate(v, sub, root);
      if (!e.empty()) return "allOf: " + e;
    }
  }
  if (s.contains("anyOf") || s.contains("oneOf")) {
    const bool one = s.contains("oneOf");
    size_t n_valid = 0;
    for (const ordered_json& sub : s[one ? "oneOf" : "anyOf"])
      n_valid += validate(v, sub, root).empty();
    if (n_valid == 0 || (one && n_valid > 1)) return one ? "not exactly one of oneOf" : "no anyOf";
  }
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
    return "not in enum";
  }
  if (s.contains("const") && s["const"] != v) return "not const";
  if (s.contains("type")) {
    const ordered_json types = s["type"].is_array() ? s["type"] : ordered_json::array({s["type"]});
    bool ok = false;
    for (const ordered_json& t : types) ok = ok || has_type(v, t.get<std::string>());
    if (!ok) return "wrong type for " + v.dump();
  }
  if (v.is_object()) return validate_object(v, s, root);
  if (v.is_array()) return validate_array(v, s, root);
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return "string too short";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return "string too long";
  }
  return "";
}

}  // namespace minfer::grammar::testing
