// JsonGrammar: the set of JSON texts that constrained decoding may produce,
// compiled once per request from OpenAI's response_format (any JSON object, or
// a JSON schema) into a graph of nodes that the recognizer (recognizer.h)
// walks byte by byte.
//
// Contract:
// - any_json() is OpenAI's "json_object" mode: any JSON *object* (values
//   inside it are any JSON).
// - from_schema() accepts the subset of JSON Schema (draft 2020-12, as used by
//   OpenAI structured outputs) listed below. A keyword outside the subset, or a
//   malformed one, is a kInvalidArgument error naming the keyword and the JSON
//   pointer of the schema that holds it ("/" is the root), e.g.
//   `schema: unsupported keyword "pattern" at /properties/name`. A schema that
//   no finite JSON value satisfies is also a kInvalidArgument error.
// - The language is a subset of what the schema validates (everything
//   generated validates; not everything valid can be generated):
//   * `type` (a name or a list): object, array, string, number, integer,
//     boolean, null; no `type` means every type, each with the keywords that
//     apply to it. `integer` is written without fraction or exponent.
//   * objects: declared `properties` come in the schema's order (see
//     from_schema), each
//     `required` one present, each optional one present or absent;
//     `additionalProperties` false, true or a schema; when absent it is
//     taken as false if `properties` is present (only declared properties
//     are generated) and as true otherwise ({"type": "object"} is any
//     object). Additional
//     properties may appear anywhere, their keys written without escapes and
//     never equal to a declared name. `required` must name declared
//     properties.
//   * arrays: `items` (a schema or a bool), `prefixItems`, `minItems`,
//     `maxItems`. Without `items`, items past `prefixItems` are any JSON.
//   * strings: `minLength`, `maxLength` in code points (an escape is one code
//     point, a surrogate pair one). `format` is ignored.
//   * `enum`, `const`: the value written as nlohmann dumps it (compact, keys
//     in the document's order); with sibling keywords, only the values those
//     accept.
//   * `anyOf`, `oneOf` (generated as anyOf: a text may match several
//     branches), `allOf` with exactly one element, `$ref` to a JSON pointer
//     in this document ("#", "#/$defs/x", "#/definitions/x"; recursion
//     allowed). These combine with no constraining sibling keyword.
//   * ignored annotations: description, title, default, examples, $schema,
//     $id, $comment, strict, deprecated, readOnly, writeOnly, format, and
//     $defs/definitions (read only through $ref).
//   * `true` / `{}` is any JSON value; `false` no value.
//   * `enum`/`const` values nested deeper than kMaxNesting (recognizer.h) are
//     never generated.
//
// Limits: every bound below is a kInvalidArgument error naming the limit
// (and, from from_schema, the JSON pointer where it was crossed), so that a
// request is refused on the thread that compiles it rather than failing, or
// stalling the engine, during generation. They keep compilation linear (up to
// log factors) in the schema's size, and the first mask() on a 262k-token
// vocabulary well under 100 ms (docs/GRAMMAR.md, "Limits").
//   * kMaxSchemaDepth: nested schemas the compiler may descend (properties,
//     items, anyOf, allOf, and each `$ref` followed), so that no schema can
//     overflow the stack; the nlohmann::json overload also refuses documents
//     nested deeper than kMaxSchemaJsonDepth before converting them.
//   * kMaxGrammarNodes: nodes in the compiled graph (about one per schema,
//     property, enum value and type).
//   * kMaxBranching: parse states one byte may open from one state — the
//     alternatives of a union after flattening (anyOf/oneOf branches, `enum`
//     values, `type` lists, nested unions and `$ref`s), counting an object
//     alternative as the keys it may start with; and the keys one object may
//     start with at a '"' (a run of optional properties up to and including
//     the next required one, plus one for additional properties).
//   * kMaxLiteralBytes: bytes of `enum`/`const` values and property names.
//   * kMaxNesting (recognizer.h): a schema every value of which needs more
//     open objects/arrays than the recognizer allows is refused; a value that
//     would need more nesting than is left where it sits is never started.
// What no compile-time bound foresees: alternatives that share a long
// prefix stay alive together, and their own branching multiplies (a union of
// near-identical objects, each holding a wide union), which can exceed
// kMaxStates (json_constraint.h) mid-generation.
//
// Ownership and threading: immutable after creation; share it across threads
// and sequences through the shared_ptr.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace minfer::grammar {

// The compiled graph. Node ids index JsonGrammar::nodes(); -1 means "none".
enum class NodeKind : uint8_t {
  kUnion,    // one of `alternatives`, none of which is a union (flattened)
  kObject,   // {...} with declared and additional properties
  kArray,    // [...]
  kString,   // "..." with a code point count bound
  kNumber,   // any JSON number
  kInteger,  // -?(0|[1-9][0-9]*)
  kLiteral,  // exactly `text` (true, false, null, enum and const values)
};

struct Property {
  std::string name;      // decoded (UTF-8)
  std::string key_text;  // JSON-escaped name after the opening quote, closing quote included
  int32_t value = -1;    // node of the value
  bool required = false;
};

inline constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

// The limits of the contract above.
inline constexpr int kMaxSchemaDepth = 256;
inline constexpr int kMaxSchemaJsonDepth = 1024;
inline constexpr size_t kMaxGrammarNodes = 32768;
inline constexpr size_t kMaxBranching = 1024;
inline constexpr size_t kMaxLiteralBytes = 256 * 1024;
// Node::min_nesting of a node no finite value satisfies.
inline constexpr int32_t kUnsatisfiable = std::numeric_limits<int32_t>::max();

struct Node {
  NodeKind kind = NodeKind::kUnion;
  std::vector<int32_t> alternatives;  // kUnion

  // kObject. next_required[i]: the first required property at index >= i, or
  // properties.size() (size properties.size() + 1).
  std::vector<Property> properties;
  std::vector<int32_t> next_required;
  int32_t additional = -1;                // node of additional property values; -1: none
  std::vector<std::string> sorted_names;  // every declared name, sorted: no additional key

  // kArray: item i is prefix_items[i], then `items` (-1: no more items).
  std::vector<int32_t> prefix_items;
  int32_t items = -1;
  int64_t min_items = 0;
  int64_t max_items = kUnbounded;

  // kString.
  int64_t min_length = 0;
  int64_t max_length = kUnbounded;

  std::string text;  // kLiteral

  // The fewest open objects/arrays a value of this node needs, its own
  // included (kUnsatisfiable: none); filled by from_nodes.
  int32_t min_nesting = 0;

  int32_t item_node(int64_t index) const {
    if (index < static_cast<int64_t>(prefix_items.size())) return prefix_items[index];
    return items;
  }
};

class JsonGrammar {
 public:
  // Any JSON object (OpenAI's json_object mode).
  [[nodiscard]] static Result<std::shared_ptr<const JsonGrammar>> any_json();
  // The schema's language (see the subset above); kInvalidArgument errors.
  // Declared properties are generated in the order the JSON object holds
  // them: pass an ordered_json (parse the request with it) to keep the
  // schema's declaration order; nlohmann::json sorts keys, so with it the
  // order is alphabetical.
  [[nodiscard]] static Result<std::shared_ptr<const JsonGrammar>> from_schema(
      const nlohmann::ordered_json& schema);
  [[nodiscard]] static Result<std::shared_ptr<const JsonGrammar>> from_schema(
      const nlohmann::json& schema);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int32_t id) const { return nodes_[id]; }
  int32_t root() const { return root_; }

  // Builds a grammar from a graph (used by the schema compiler): flattens
  // unions, drops what no finite value within kMaxNesting satisfies, fills
  // next_required, sorted_names and min_nesting. kInvalidArgument if the root
  // is unsatisfiable, needs more than kMaxNesting levels, or the graph
  // crosses kMaxGrammarNodes or kMaxBranching.
  [[nodiscard]] static Result<std::shared_ptr<const JsonGrammar>> from_nodes(
      std::vector<Node> nodes, int32_t root);

 private:
  JsonGrammar(std::vector<Node> nodes, int32_t root) : nodes_(std::move(nodes)), root_(root) {}
  std::vector<Node> nodes_;
  int32_t root_ = -1;
};

// Appends nodes for "any JSON value" to `nodes` and returns its id (a union of
// object, array, string, number and the three literals).
int32_t add_any_value_nodes(std::vector<Node>& nodes);

// Calls f(id) for every node `n` refers to (-1 included).
template <typename F>
void for_each_child(const Node& n, F&& f) {
  for (int32_t id : n.alternatives) f(id);
  for (const Property& p : n.properties) f(p.value);
  if (n.kind == NodeKind::kObject) f(n.additional);
  for (int32_t id : n.prefix_items) f(id);
  if (n.kind == NodeKind::kArray) f(n.items);
}

}  // namespace minfer::grammar
