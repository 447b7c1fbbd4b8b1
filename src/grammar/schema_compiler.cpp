// JsonGrammar::from_schema: JSON Schema (the subset json_grammar.h lists) to
// grammar nodes. Every schema object is checked keyword by keyword; a keyword
// outside the subset is an error naming it and the schema's JSON pointer.
// The compiler recurses once per nested schema (and per `$ref` followed);
// depth_ bounds that recursion by kMaxSchemaDepth, and the size limits are
// checked as nodes are added, before any work proportional to their count.
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_grammar.h"
#include "grammar/recognizer.h"

namespace minfer::grammar {
namespace {

using nlohmann::ordered_json;

const std::set<std::string>& ignored_keywords() {
  static const std::set<std::string> k = {
      "description", "title",      "default",  "examples",  "$schema", "$id",   "$comment",
      "strict",      "deprecated", "readOnly", "writeOnly", "format",  "$defs", "definitions"};
  return k;
}

// Keywords that constrain a value of one JSON type.
const std::set<std::string>& typed_keywords() {
  static const std::set<std::string> k = {
      "type",      "properties",  "required", "additionalProperties",
      "items",     "prefixItems", "minItems", "maxItems",
      "minLength", "maxLength"};
  return k;
}

const std::set<std::string>& combining_keywords() {
  static const std::set<std::string> k = {"anyOf", "oneOf", "allOf", "$ref", "enum", "const"};
  return k;
}

std::string at(const std::string& path) {
  return " at " + (path.empty() ? "/" : path);
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char ch : key) {
    if (ch == '~') {
      out += "~0";
    } else if (ch == '/') {
      out += "~1";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string dump(const ordered_json& v) {
  return v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

Status bad(const std::string& what, const std::string& path) {
  return Status::invalid_argument("schema: " + what + at(path));
}

Result<int64_t> non_negative(const ordered_json& schema, const char* key, const std::string& path) {
  const ordered_json& v = schema[key];
  if (v.is_number_unsigned())
    return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), kUnbounded));
  // A document built in code (not parsed) holds small integers as signed.
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  if (v.is_number_float() && v.get<double>() >= 0 &&
      v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    return static_cast<int64_t>(v.get<double>());
  }
  return bad("\"" + std::string(key) + "\" must be a non-negative integer", path);
}

Node literal_node(std::string text) {
  Node n;
  n.kind = NodeKind::kLiteral;
  n.text = std::move(text);
  return n;
}

// True when `v` nests more than `limit` arrays/objects; an explicit stack, so
// that a value too deep to generate is never recursed into (nlohmann's dump,
// copy and == recurse).
template <typename Json>
bool nested_deeper_than(const Json& v, int limit) {
  std::vector<std::pair<const Json*, int>> todo = {{&v, 0}};
  while (!todo.empty()) {
    const auto [value, depth] = todo.back();
    todo.pop_back();
    if (!value->is_structured()) continue;
    if (depth + 1 > limit) return true;
    for (const Json& child : *value) todo.emplace_back(&child, depth + 1);
  }
  return false;
}

// The nodes reachable from `root`, renumbered (the new root is 0): the
// enum filter's grammar, so that it does not copy the whole graph per enum.
std::vector<Node> reachable(const std::vector<Node>& nodes, int32_t root) {
  std::unordered_map<int32_t, int32_t> id;
  std::vector<int32_t> order = {root};
  id[root] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for_each_child(nodes[order[i]], [&](int32_t c) {
      if (c >= 0 && id.emplace(c, static_cast<int32_t>(order.size())).second) order.push_back(c);
    });
  }
  std::vector<Node> out;
  out.reserve(order.size());
  auto renumber = [&](int32_t& c) {
    if (c >= 0) c = id.at(c);
  };
  for (int32_t old : order) {
    Node n = nodes[old];
    for (int32_t& c : n.alternatives) renumber(c);
    for (Property& p : n.properties) renumber(p.value);
    for (int32_t& c : n.prefix_items) renumber(c);
    renumber(n.additional);
    renumber(n.items);
    out.push_back(std::move(n));
  }
  return out;
}

// kMaxBranching for the keys a '"' may start (JsonGrammar::from_nodes checks
// it again after pruning, without the path): a run of optional properties up
// to and including the next required one, plus an additional key.
Status check_key_branching(const Node& n, const std::string& path) {
  size_t run = 0;
  size_t widest = 0;
  for (const Property& p : n.properties) {
    ++run;
    widest = std::max(widest, run);
    if (p.required) run = 0;
  }
  widest += n.additional >= 0 ? 1 : 0;
  if (widest <= kMaxBranching) return Status::ok();
  return bad("an object whose keys may start with " + std::to_string(widest) +
                 " properties (a run of optional ones), more than kMaxBranching (" +
                 std::to_string(kMaxBranching) + ")",
             path);
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const ordered_json& root) : root_(root) {}

  Result<int32_t> compile(const ordered_json& schema, const std::string& path);
  std::vector<Node>& nodes() { return nodes_; }

 private:
  int32_t add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int32_t>(nodes_.size()) - 1;
  }
  Result<int32_t> compile_checked(const ordered_json& schema, const std::string& path);
  Status count_literal(size_t bytes, const std::string& path);
  int32_t any() {
    if (any_ < 0) any_ = add_any_value_nodes(nodes_);
    return any_;
  }
  int32_t union_of(std::vector<int32_t> alternatives) {
    if (alternatives.size() == 1) return alternatives[0];
    Node n;
    n.alternatives = std::move(alternatives);
    return add(std::move(n));
  }
  Result<int32_t> compile_ref(const ordered_json& ref, const std::string& path);
  Result<int32_t> compile_any_of(const ordered_json& list, const char* key,
                                 const std::string& path);
  Result<int32_t> compile_values(const ordered_json& schema, const std::string& path);
  Result<int32_t> compile_typed(const ordered_json& schema, const std::string& path);
  Result<int32_t> compile_object(const ordered_json& schema, const std::string& path);
  Result<int32_t> compile_array(const ordered_json& schema, const std::string& path);
  Result<int32_t> compile_string(const ordered_json& schema, const std::string& path);
  Result<int32_t> compile_bool_or_schema(const ordered_json& v, const std::string& path);

  const ordered_json& root_;
  std::vector<Node> nodes_;
  std::map<std::string, int32_t> refs_;
  int32_t any_ = -1;
  int depth_ = 0;             // compile() calls in progress
  size_t literal_bytes_ = 0;  // enum/const texts and property names so far
};

// compile() nests once per schema level and per `$ref` followed (a chain of
// `$defs` is shallow JSON but a deep compile), hence the depth bound here.
Result<int32_t> SchemaCompiler::compile(const ordered_json& schema, const std::string& path) {
  if (depth_ >= kMaxSchemaDepth) {
    return bad("schemas nested deeper than kMaxSchemaDepth (" + std::to_string(kMaxSchemaDepth) +
                   ", counting properties, items, anyOf/oneOf/allOf and $ref)",
               path);
  }
  if (nodes_.size() > kMaxGrammarNodes) {
    return bad("more than kMaxGrammarNodes (" + std::to_string(kMaxGrammarNodes) +
                   ") grammar nodes (schemas, properties, enum values, types)",
               path);
  }
  ++depth_;
  Result<int32_t> id = compile_checked(schema, path);
  --depth_;
  return id;
}

Status SchemaCompiler::count_literal(size_t bytes, const std::string& path) {
  literal_bytes_ += bytes;
  if (literal_bytes_ <= kMaxLiteralBytes) return Status::ok();
  return bad("more than kMaxLiteralBytes (" + std::to_string(kMaxLiteralBytes) +
                 ") bytes of enum/const values and property names",
             path);
}

Result<int32_t> SchemaCompiler::compile_checked(const ordered_json& schema,
                                                const std::string& path) {
  if (schema.is_boolean()) return schema.get<bool>() ? any() : add(Node{});
  if (!schema.is_object()) return bad("expected a schema (an object or a boolean)", path);
  std::vector<std::string> combining;
  std::string typed;  // the first typed keyword, if any
  for (const auto& [key, value] : schema.items()) {
    if (combining_keywords().count(key)) {
      combining.push_back(key);
    } else if (typed_keywords().count(key)) {
      if (typed.empty()) typed = key;
    } else if (!ignored_keywords().count(key)) {
      return bad("unsupported keyword \"" + key + "\"", path);
    }
  }
  const bool values = schema.contains("enum") || schema.contains("const");
  if (values) return compile_values(schema, path);
  if (combining.empty()) return compile_typed(schema, path);
  if (combining.size() > 1 || !typed.empty()) {
    const std::string& other = combining.size() > 1 ? combining[1] : typed;
    return bad("unsupported keyword \"" + combining[0] + "\" combined with \"" + other + "\"",
               path);
  }
  const std::string& key = combining[0];
  if (key == "$ref") return compile_ref(schema["$ref"], path);
  if (key == "allOf") {
    const ordered_json& list = schema["allOf"];
    if (!list.is_array() || list.size() != 1) {
      return bad("unsupported keyword \"allOf\" (only a list of exactly one schema is supported)",
                 path);
    }
    return compile(list[0], path + "/allOf/0");
  }
  return compile_any_of(schema[key], key.c_str(), path);
}

Result<int32_t> SchemaCompiler::compile_any_of(const ordered_json& list, const char* key,
                                               const std::string& path) {
  if (!list.is_array() || list.empty()) {
    return bad("\"" + std::string(key) + "\" must be a non-empty array of schemas", path);
  }
  if (list.size() > kMaxBranching) {
    return bad("\"" + std::string(key) + "\" of " + std::to_string(list.size()) +
                   " schemas, more than kMaxBranching (" + std::to_string(kMaxBranching) + ")",
               path);
  }
  std::vector<int32_t> alternatives;
  for (size_t i = 0; i < list.size(); ++i) {
    MINFER_ASSIGN_OR_RETURN(int32_t alt,
                            compile(list[i], path + "/" + key + "/" + std::to_string(i)));
    alternatives.push_back(alt);
  }
  return union_of(std::move(alternatives));
}

Result<int32_t> SchemaCompiler::compile_ref(const ordered_json& ref, const std::string& path) {
  if (!ref.is_string() || ref.get<std::string>().empty() || ref.get<std::string>()[0] != '#') {
    return bad("unsupported keyword \"$ref\" (only \"#...\" pointers into this schema)", path);
  }
  const std::string pointer = ref.get<std::string>().substr(1);
  if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
  const ordered_json* target = &root_;
  if (!pointer.empty()) {
    try {
      const ordered_json::json_pointer p(pointer);
      if (!root_.contains(p)) return bad("\"$ref\" \"#" + pointer + "\" names nothing", path);
      target = &root_.at(p);
    } catch (const ordered_json::exception& e) {
      return bad("\"$ref\" \"#" + pointer + "\" is not a JSON pointer (" + e.what() + ")", path);
    }
  }
  // A placeholder first, so that a recursive reference finds this id.
  const int32_t id = add(Node{});
  refs_[pointer] = id;
  MINFER_ASSIGN_OR_RETURN(int32_t body, compile(*target, pointer));
  nodes_[id].alternatives = {body};
  return id;
}

// enum/const: the listed values, as literals. With sibling keywords (a
// "type", "minLength"...), only the values those keywords accept. Values
// nested deeper than kMaxNesting could never be generated and are dropped
// before anything recurses into them.
Result<int32_t> SchemaCompiler::compile_values(const ordered_json& schema,
                                               const std::string& path) {
  for (const char* other : {"anyOf", "oneOf", "allOf", "$ref"}) {
    if (schema.contains(other)) {
      return bad("unsupported keyword \"" + std::string(other) + "\" combined with enum/const",
                 path);
    }
  }
  auto generable = [](const ordered_json& v) { return !nested_deeper_than(v, kMaxNesting); };
  std::vector<const ordered_json*> values;
  if (schema.contains("const") && generable(schema["const"])) values.push_back(&schema["const"]);
  if (schema.contains("enum")) {
    const ordered_json& list = schema["enum"];
    if (!list.is_array()) return bad("\"enum\" must be an array", path);
    if (list.size() > kMaxBranching) {
      return bad("\"enum\" of " + std::to_string(list.size()) +
                     " values, more than kMaxBranching (" + std::to_string(kMaxBranching) + ")",
                 path);
    }
    if (schema.contains("const")) {
      // Both: the const value, if the enum lists it.
      bool listed = false;
      for (const ordered_json& v : list)
        listed = listed || (generable(v) && !values.empty() && v == *values[0]);
      if (!listed) values.clear();
    } else {
      for (const ordered_json& v : list) {
        if (generable(v)) values.push_back(&v);
      }
    }
  }
  bool typed = false;
  for (const auto& item : schema.items()) typed = typed || typed_keywords().count(item.key()) > 0;
  std::shared_ptr<const JsonGrammar> filter;
  if (typed) {
    MINFER_ASSIGN_OR_RETURN(int32_t typed_node, compile_typed(schema, path));
    Result<std::shared_ptr<const JsonGrammar>> g =
        JsonGrammar::from_nodes(reachable(nodes_, typed_node), 0);
    if (!g.is_ok()) values.clear();  // the siblings accept nothing (limits: see from_nodes)
    if (g.is_ok()) filter = *g;
  }
  std::vector<int32_t> literals;
  std::set<std::string> seen;
  for (const ordered_json* v : values) {
    std::string text = dump(*v);
    MINFER_RETURN_IF_ERROR(count_literal(text.size(), path));
    if (filter != nullptr && !matches(*filter, filter->root(), text)) continue;
    if (seen.insert(text).second) literals.push_back(add(literal_node(std::move(text))));
  }
  if (literals.empty()) return add(Node{});  // nothing: an empty union
  return union_of(std::move(literals));
}

Result<int32_t> SchemaCompiler::compile_typed(const ordered_json& schema, const std::string& path) {
  std::vector<std::string> types;
  if (!schema.contains("type")) {
    types = {"object", "array", "string", "number", "boolean", "null"};
  } else if (schema["type"].is_string()) {
    types = {schema["type"].get<std::string>()};
  } else if (schema["type"].is_array()) {
    for (const ordered_json& t : schema["type"]) {
      if (!t.is_string()) return bad("\"type\" must be a string or an array of strings", path);
      types.push_back(t.get<std::string>());
    }
  } else {
    return bad("\"type\" must be a string or an array of strings", path);
  }
  std::vector<int32_t> alternatives;
  for (const std::string& t : types) {
    if (t == "object" || t == "array" || t == "string") {
      Result<int32_t> n = t == "object"  ? compile_object(schema, path)
                          : t == "array" ? compile_array(schema, path)
                                         : compile_string(schema, path);
      if (!n.is_ok()) return n.status();
      alternatives.push_back(*n);
    } else if (t == "number" || t == "integer") {
      Node n;
      n.kind = t == "number" ? NodeKind::kNumber : NodeKind::kInteger;
      alternatives.push_back(add(std::move(n)));
    } else if (t == "boolean") {
      alternatives.push_back(add(literal_node("true")));
      alternatives.push_back(add(literal_node("false")));
    } else if (t == "null") {
      alternatives.push_back(add(literal_node("null")));
    } else {
      return bad("unknown type \"" + t + "\"", path);
    }
  }
  if (alternatives.empty()) return add(Node{});
  return union_of(std::move(alternatives));
}

Result<int32_t> SchemaCompiler::compile_bool_or_schema(const ordered_json& v,
                                                       const std::string& path) {
  if (v.is_boolean()) return v.get<bool>() ? any() : -1;
  return compile(v, path);
}

Result<int32_t> SchemaCompiler::compile_object(const ordered_json& schema,
                                               const std::string& path) {
  Node n;
  n.kind = NodeKind::kObject;
  std::unordered_map<std::string, size_t> index;  // property name -> position
  if (schema.contains("properties")) {
    const ordered_json& props = schema["properties"];
    if (!props.is_object()) return bad("\"properties\" must be an object", path);
    for (const auto& [name, sub] : props.items()) {
      Property p;
      p.name = name;
      p.key_text = dump(ordered_json(name)).substr(1);
      MINFER_RETURN_IF_ERROR(count_literal(p.key_text.size(), path));
      MINFER_ASSIGN_OR_RETURN(p.value, compile(sub, path + "/properties/" + pointer_token(name)));
      index[name] = n.properties.size();
      n.properties.push_back(std::move(p));
    }
  }
  if (schema.contains("required")) {
    const ordered_json& required = schema["required"];
    if (!required.is_array()) return bad("\"required\" must be an array of strings", path);
    for (const ordered_json& r : required) {
      if (!r.is_string()) return bad("\"required\" must be an array of strings", path);
      auto it = index.find(r.get<std::string>());
      if (it == index.end()) {
        return bad("required property \"" + r.get<std::string>() + "\" is not in \"properties\"",
                   path);
      }
      n.properties[it->second].required = true;
    }
  }
  if (schema.contains("additionalProperties")) {
    MINFER_ASSIGN_OR_RETURN(n.additional, compile_bool_or_schema(schema["additionalProperties"],
                                                                 path + "/additionalProperties"));
  } else if (!schema.contains("properties")) {
    n.additional = any();  // a bare {"type": "object"}: any object
  }                        // else absent is false: only the declared properties are generated
  MINFER_RETURN_IF_ERROR(check_key_branching(n, path));
  return add(std::move(n));
}

Result<int32_t> SchemaCompiler::compile_array(const ordered_json& schema, const std::string& path) {
  Node n;
  n.kind = NodeKind::kArray;
  if (schema.contains("prefixItems")) {
    const ordered_json& prefix = schema["prefixItems"];
    if (!prefix.is_array()) return bad("\"prefixItems\" must be an array of schemas", path);
    for (size_t i = 0; i < prefix.size(); ++i) {
      MINFER_ASSIGN_OR_RETURN(int32_t item,
                              compile(prefix[i], path + "/prefixItems/" + std::to_string(i)));
      n.prefix_items.push_back(item);
    }
  }
  if (schema.contains("items")) {
    if (schema["items"].is_array()) {
      return bad("\"items\" must be a schema (use \"prefixItems\" for tuples)", path);
    }
    MINFER_ASSIGN_OR_RETURN(n.items, compile_bool_or_schema(schema["items"], path + "/items"));
  } else {
    n.items = any();
  }
  if (schema.contains("minItems")) {
    MINFER_ASSIGN_OR_RETURN(n.min_items, non_negative(schema, "minItems", path));
  }
  if (schema.contains("maxItems")) {
    MINFER_ASSIGN_OR_RETURN(n.max_items, non_negative(schema, "maxItems", path));
  }
  return add(std::move(n));
}

Result<int32_t> SchemaCompiler::compile_string(const ordered_json& schema,
                                               const std::string& path) {
  Node n;
  n.kind = NodeKind::kString;
  if (schema.contains("minLength")) {
    MINFER_ASSIGN_OR_RETURN(n.min_length, non_negative(schema, "minLength", path));
  }
  if (schema.contains("maxLength")) {
    MINFER_ASSIGN_OR_RETURN(n.max_length, non_negative(schema, "maxLength", path));
  }
  return add(std::move(n));
}

}  // namespace

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_schema(
    const nlohmann::ordered_json& schema) {
  try {
    SchemaCompiler compiler(schema);
    MINFER_ASSIGN_OR_RETURN(int32_t root, compiler.compile(schema, ""));
    return from_nodes(std::move(compiler.nodes()), root);
  } catch (const nlohmann::ordered_json::exception& e) {
    return Status::invalid_argument(std::string("schema: ") + e.what());
  }
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_schema(const nlohmann::json& schema) {
  // The conversion recurses over the whole document, annotations included.
  if (nested_deeper_than(schema, kMaxSchemaJsonDepth)) {
    return Status::invalid_argument("schema: a document nested deeper than kMaxSchemaJsonDepth (" +
                                    std::to_string(kMaxSchemaJsonDepth) +
                                    ") levels, beyond kMaxSchemaDepth");
  }
  return from_schema(nlohmann::ordered_json(schema));
}

}  // namespace minfer::grammar
