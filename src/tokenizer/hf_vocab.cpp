#include "tokenizer/hf_vocab.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "base/json.h"

namespace minfer::tokenizer {

namespace {

struct AddedToken {
  std::string content;
  bool special = false;
};

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::invalid_argument(path.string() + ": read error");
  return ss.str();
}

// Document order, as the files list their tokens (and faster to build than
// a map for vocab.json's hundred thousand and more keys).
using json = nlohmann::ordered_json;

// Parses a JSON file, or returns a null value when the file does not exist.
Result<json> read_json(const std::filesystem::path& path, bool required) {
  if (!required && !std::filesystem::exists(path)) return json();
  MINFER_ASSIGN_OR_RETURN(std::string text, read_file(path));
  Result<json> v = parse_ordered_json(text);
  if (!v) return v.status().with_context(path.string());
  return v;
}

Result<int32_t> as_id(const json& v, const std::string& what) {
  MINFER_ASSIGN_OR_RETURN(int64_t id, json_to_int(v, what + " id", 0, INT32_MAX - 1));
  return static_cast<int32_t>(id);
}

bool looks_special(const std::string& t) {
  auto wraps = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wraps("<|", "|>") ||
         wraps("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wraps("<unused", ">");
}

// Added tokens from added_tokens.json and tokenizer_config.json's
// added_tokens_decoder (which also says whether a token is special).
Status collect_added(const json& added_json, const json& config,
                     std::map<int32_t, AddedToken>& added) {
  if (added_json.is_object()) {
    for (const auto& [content, idv] : added_json.items()) {
      MINFER_ASSIGN_OR_RETURN(int32_t id, as_id(idv, "added_tokens.json \"" + content + "\""));
      added[id].content = content;
    }
  }
  const json* dec = json_find(config, "added_tokens_decoder");
  if (dec == nullptr || !dec->is_object()) return Status::ok();
  for (const auto& [key, entry] : dec->items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id >= INT32_MAX) {
      return Status::invalid_argument("tokenizer_config.json: added_tokens_decoder key \"" + key +
                                      "\" is not an id");
    }
    const json* content = json_find(entry, "content");
    if (content == nullptr || !content->is_string()) {
      return Status::invalid_argument("tokenizer_config.json: added token " + key +
                                      " has no content");
    }
    AddedToken& t = added[static_cast<int32_t>(id)];
    t.content = content->get<std::string>();
    const json* special = json_find(entry, "special");
    t.special = special != nullptr && special->is_boolean() && special->get<bool>();
  }
  return Status::ok();
}

Status read_merges(const std::filesystem::path& path, std::vector<std::string>& merges) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && line.starts_with("#")) {
      first = false;
      continue;
    }
    first = false;
    // Same tolerance as the GGUF converter: blank lines are skipped, a pair is
    // any two whitespace-separated fields.
    std::istringstream fields(line);
    std::string a, b, extra;
    if (!(fields >> a)) continue;
    if (!(fields >> b) || (fields >> extra)) {
      return Status::invalid_argument(path.string() + ": malformed merge \"" + line + "\"");
    }
    merges.push_back(a + " " + b);
  }
  return Status::ok();
}

int32_t special_id(const json& config, const json& model_config, const std::string& typ,
                   const std::unordered_map<std::string, int32_t>& ids) {
  const json* e = json_find(config, typ + "_token");
  const json* content = e;
  if (e != nullptr && e->is_object()) content = json_find(*e, "content");
  if (content != nullptr && content->is_string()) {
    auto it = ids.find(content->get<std::string>());
    if (it != ids.end()) return it->second;
  }
  const json* id = json_find(model_config, typ + "_token_id");
  if (id == nullptr) return -1;
  auto v = json_to_int(*id, typ + "_token_id", 0, INT32_MAX - 1);
  return v.is_ok() ? static_cast<int32_t>(*v) : -1;  // not an id: no such special token
}

bool flag(const json& config, const std::string& key) {
  const json* v = json_find(config, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

}  // namespace

namespace {

// vocab.json plus the added tokens, as id -> text and text -> id.
struct IdTable {
  std::map<int32_t, std::string> by_id;
  std::unordered_map<std::string, int32_t> ids;
};

Result<IdTable> build_id_table(const std::string& dir, const json& vocab_json,
                               const std::map<int32_t, AddedToken>& added) {
  if (!vocab_json.is_object())
    return Status::invalid_argument(dir + "/vocab.json: expected an object");
  IdTable t;
  for (const auto& [text, idv] : vocab_json.items()) {
    MINFER_ASSIGN_OR_RETURN(int32_t id, as_id(idv, dir + "/vocab.json \"" + text + "\""));
    if (!t.by_id.emplace(id, text).second) {
      return Status::invalid_argument(dir + "/vocab.json: id " + std::to_string(id) +
                                      " is used twice");
    }
    t.ids[text] = id;
  }
  for (const auto& [id, tok] : added) {
    // An added token that re-spells a vocab.json entry takes over that text.
    auto old = t.ids.find(tok.content);
    if (old != t.ids.end() && old->second != id) t.by_id.erase(old->second);
    t.by_id[id] = tok.content;
    t.ids[tok.content] = id;
  }
  return t;
}

Result<int64_t> vocab_size(const std::string& dir, const IdTable& t, const json& model_config,
                           const HfVocabOptions& options) {
  const int64_t n = t.by_id.empty() ? 0 : static_cast<int64_t>(t.by_id.rbegin()->first) + 1;
  int64_t want = options.vocab_size;
  const json* cfg_size = json_find(model_config, "vocab_size");
  if (want == 0 && cfg_size != nullptr && cfg_size->is_number_integer()) {
    MINFER_ASSIGN_OR_RETURN(want, json_to_int(*cfg_size, dir + "/config.json vocab_size", 0));
  }
  if (want != 0 && want < n) {
    return Status::invalid_argument(dir + ": vocab_size " + std::to_string(want) +
                                    " is smaller than the highest token id + 1 (" +
                                    std::to_string(n) + ")");
  }
  return std::max(n, want);
}

void fill_tokens(const IdTable& t, const std::map<int32_t, AddedToken>& added, int64_t n,
                 Vocab& v) {
  v.tokens.resize(static_cast<size_t>(n));
  v.token_types.assign(static_cast<size_t>(n), static_cast<int32_t>(TokenType::kUnused));
  for (int64_t i = 0; i < n; ++i) {
    auto it = t.by_id.find(static_cast<int32_t>(i));
    if (it == t.by_id.end()) {
      v.tokens[i] = "[PAD" + std::to_string(i) + "]";
      continue;
    }
    v.tokens[i] = it->second;
    auto a = added.find(static_cast<int32_t>(i));
    TokenType type = TokenType::kNormal;
    if (a != added.end()) {
      type = a->second.special || looks_special(it->second) ? TokenType::kControl
                                                            : TokenType::kUserDefined;
    }
    v.token_types[i] = static_cast<int32_t>(type);
  }
}

}  // namespace

Result<Vocab> load_hf_vocab(const std::string& dir, const HfVocabOptions& options) {
  const std::filesystem::path root(dir);
  MINFER_ASSIGN_OR_RETURN(json vocab_json, read_json(root / "vocab.json", true));
  MINFER_ASSIGN_OR_RETURN(json added_json, read_json(root / "added_tokens.json", false));
  MINFER_ASSIGN_OR_RETURN(json config, read_json(root / "tokenizer_config.json", false));
  MINFER_ASSIGN_OR_RETURN(json model_config, read_json(root / "config.json", false));

  std::map<int32_t, AddedToken> added;
  MINFER_RETURN_IF_ERROR(collect_added(added_json, config, added).with_context(dir));
  MINFER_ASSIGN_OR_RETURN(IdTable table, build_id_table(dir, vocab_json, added));
  MINFER_ASSIGN_OR_RETURN(int64_t n, vocab_size(dir, table, model_config, options));

  Vocab v;
  v.model = "gpt2";
  v.pre = options.pre;
  if (v.pre.empty()) {
    const json* cls = json_find(config, "tokenizer_class");
    const bool qwen2 = cls != nullptr && cls->is_string() && *cls == "Qwen2Tokenizer";
    v.pre = qwen2 ? "qwen2" : "default";
  }
  fill_tokens(table, added, n, v);
  MINFER_RETURN_IF_ERROR(read_merges(root / "merges.txt", v.merges));
  v.bos_id = special_id(config, model_config, "bos", table.ids);
  v.eos_id = special_id(config, model_config, "eos", table.ids);
  v.unk_id = special_id(config, model_config, "unk", table.ids);
  v.pad_id = special_id(config, model_config, "pad", table.ids);
  v.add_bos = flag(config, "add_bos_token") && v.bos_id >= 0;
  v.add_eos = flag(config, "add_eos_token") && v.eos_id >= 0;
  return v;
}

}  // namespace minfer::tokenizer
