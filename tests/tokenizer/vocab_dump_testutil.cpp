#include "tokenizer/vocab_dump_testutil.h"

#include <fstream>
#include <sstream>

#include "base/json.h"

namespace minfer::tokenizer::testing {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

Result<std::string> unhex(const std::string& hex) {
  if (hex.size() % 2 != 0) return Status::error("odd hex length");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

}  // namespace

Result<Vocab> load_vocab_dump(const std::string& path) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::istringstream in(text);
  std::string line;
  Vocab v;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string key;
    f >> key;
    if (key == "model") {
      f >> v.model;
    } else if (key == "pre") {
      f >> v.pre;
    } else if (key == "token") {
      int32_t type = 0;
      float score = 0;
      std::string hex;
      f >> type >> score;
      f >> hex;  // empty for an empty token
      MINFER_ASSIGN_OR_RETURN(std::string tok, unhex(hex));
      v.tokens.push_back(tok);
      v.token_types.push_back(type);
      v.scores.push_back(score);
    } else if (key == "merge") {
      std::string hex;
      f >> hex;
      MINFER_ASSIGN_OR_RETURN(std::string m, unhex(hex));
      v.merges.push_back(m);
    } else {
      int64_t value = 0;
      f >> value;
      if (key == "bos")
        v.bos_id = static_cast<int32_t>(value);
      else if (key == "eos")
        v.eos_id = static_cast<int32_t>(value);
      else if (key == "eot")
        v.eot_id = static_cast<int32_t>(value);
      else if (key == "unk")
        v.unk_id = static_cast<int32_t>(value);
      else if (key == "pad")
        v.pad_id = static_cast<int32_t>(value);
      else if (key == "add_bos")
        v.add_bos = value != 0;
      else if (key == "add_eos")
        v.add_eos = value != 0;
      else if (key == "add_space_prefix")
        v.add_space_prefix = value != 0;
      else
        return Status::error(path + ":" + std::to_string(line_no) + ": unknown key " + key);
    }
    if (f.fail() && key != "token") {
      return Status::error(path + ":" + std::to_string(line_no) + ": malformed line");
    }
  }
  return v;
}

// One case of a golden file: the text, its flags, its ids and detokenization.
Result<GoldenCase> golden_case(const nlohmann::json& c) {
  GoldenCase g;
  MINFER_ASSIGN_OR_RETURN(g.text, json_get_string(c, "text"));
  MINFER_ASSIGN_OR_RETURN(g.add_special, json_get_bool(c, "add_special"));
  MINFER_ASSIGN_OR_RETURN(g.parse_special, json_get_bool(c, "parse_special"));
  const nlohmann::json* ids = json_find(c, "ids");
  if (ids == nullptr || !ids->is_array()) return Status::error("no \"ids\" array");
  for (const nlohmann::json& id : *ids) {
    MINFER_ASSIGN_OR_RETURN(int64_t v, json_to_int(id, "ids", 0, INT32_MAX));
    g.ids.push_back(static_cast<int32_t>(v));
  }
  if (json_find(c, "detok") != nullptr) {
    MINFER_ASSIGN_OR_RETURN(g.detok, json_get_string(c, "detok"));
  } else {
    MINFER_ASSIGN_OR_RETURN(std::string hex, json_get_string(c, "detok_hex"));
    MINFER_ASSIGN_OR_RETURN(g.detok, unhex(hex));
  }
  return g;
}

Result<std::vector<GoldenCase>> load_golden(const std::string& path) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_file(path));
  Result<nlohmann::json> doc = parse_json(text);
  if (!doc) return doc.status().with_context(path);
  const nlohmann::json* cases = json_find(*doc, "cases");
  if (cases == nullptr || !cases->is_array()) return Status::error(path + ": no cases");
  std::vector<GoldenCase> out;
  for (const nlohmann::json& c : *cases) {
    Result<GoldenCase> g = golden_case(c);
    if (!g) return g.status().with_context(path + ": case " + std::to_string(out.size()));
    out.push_back(std::move(g).value());
  }
  return out;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace minfer::tokenizer::testing
