#include "grammar/json_grammar.h"

#include <algorithm>
#include <utility>

namespace minfer::grammar {
namespace {

Node literal(std::string text) {
  Node n;
  n.kind = NodeKind::kLiteral;
  n.text = std::move(text);
  return n;
}

// Replaces every union's alternatives by the non-union nodes it reaches
// through unions (cycles of unions reach nothing new).
void flatten_unions(std::vector<Node>& nodes) {
  const size_t n = nodes.size();
  for (size_t u = 0; u < n; ++u) {
    if (nodes[u].kind != NodeKind::kUnion) continue;
    std::vector<bool> seen(n, false);
    std::vector<int32_t> todo = nodes[u].alternatives;
    std::vector<int32_t> flat;
    seen[u] = true;
    while (!todo.empty()) {
      const int32_t id = todo.back();
      todo.pop_back();
      if (seen[id]) continue;
      seen[id] = true;
      if (nodes[id].kind == NodeKind::kUnion) {
        todo.insert(todo.end(), nodes[id].alternatives.begin(), nodes[id].alternatives.end());
      } else {
        flat.push_back(id);
      }
    }
    std::sort(flat.begin(), flat.end());
    nodes[u].alternatives = std::move(flat);
  }
}

bool is_productive(const std::vector<Node>& nodes, const std::vector<bool>& productive,
                   const Node& node) {
  auto ok = [&](int32_t id) { return id >= 0 && productive[id]; };
  switch (node.kind) {
    case NodeKind::kUnion:
      return std::any_of(node.alternatives.begin(), node.alternatives.end(), ok);
    case NodeKind::kObject:
      return std::all_of(node.properties.begin(), node.properties.end(),
                         [&](const Property& p) { return !p.required || ok(p.value); });
    case NodeKind::kArray: {
      if (node.min_items > node.max_items) return false;
      const int64_t n_prefix = static_cast<int64_t>(node.prefix_items.size());
      for (int64_t i = 0; i < std::min(node.min_items, n_prefix); ++i) {
        if (!ok(node.prefix_items[i])) return false;
      }
      return node.min_items <= n_prefix || ok(node.items);
    }
    case NodeKind::kString:
      return node.min_length <= node.max_length;
    default:
      return true;
  }
}

// The least fixpoint: a node is productive when some finite text matches it.
std::vector<bool> productive_nodes(const std::vector<Node>& nodes) {
  std::vector<bool> productive(nodes.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!productive[i] && is_productive(nodes, productive, nodes[i])) {
        productive[i] = true;
        changed = true;
      }
    }
  }
  return productive;
}

// Removes every reference to an unproductive node, so that the recognizer
// never enters a state from which no complete text can be reached.
void prune(std::vector<Node>& nodes, const std::vector<bool>& productive) {
  auto ok = [&](int32_t id) { return id >= 0 && productive[id]; };
  for (Node& node : nodes) {
    std::erase_if(node.alternatives, [&](int32_t id) { return !ok(id); });
    if (node.kind == NodeKind::kObject) {
      node.sorted_names.clear();
      for (const Property& p : node.properties) node.sorted_names.push_back(p.name);
      std::sort(node.sorted_names.begin(), node.sorted_names.end());
      std::erase_if(node.properties, [&](const Property& p) { return !ok(p.value); });
      if (!ok(node.additional)) node.additional = -1;
      const size_t n = node.properties.size();
      node.next_required.assign(n + 1, static_cast<int32_t>(n));
      for (size_t i = n; i-- > 0;) {
        node.next_required[i] =
            node.properties[i].required ? static_cast<int32_t>(i) : node.next_required[i + 1];
      }
    }
    if (node.kind == NodeKind::kArray) {
      for (size_t i = 0; i < node.prefix_items.size(); ++i) {
        if (!ok(node.prefix_items[i])) {
          node.prefix_items.resize(i);
          node.items = -1;
          break;
        }
      }
      if (!ok(node.items)) node.items = -1;
    }
  }
}

}  // namespace

int32_t add_any_value_nodes(std::vector<Node>& nodes) {
  const int32_t any = static_cast<int32_t>(nodes.size());
  nodes.emplace_back();  // the union, filled below
  Node object;
  object.kind = NodeKind::kObject;
  object.additional = any;
  Node array;
  array.kind = NodeKind::kArray;
  array.items = any;
  Node string;
  string.kind = NodeKind::kString;
  Node number;
  number.kind = NodeKind::kNumber;
  for (Node* n : {&object, &array, &string, &number}) {
    nodes[any].alternatives.push_back(static_cast<int32_t>(nodes.size()));
    nodes.push_back(std::move(*n));
  }
  for (const char* text : {"true", "false", "null"}) {
    nodes[any].alternatives.push_back(static_cast<int32_t>(nodes.size()));
    nodes.push_back(literal(text));
  }
  return any;
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::any_json() {
  std::vector<Node> nodes;
  const int32_t any = add_any_value_nodes(nodes);
  Node object;
  object.kind = NodeKind::kObject;
  object.additional = any;
  const auto root = static_cast<int32_t>(nodes.size());
  nodes.push_back(std::move(object));
  return from_nodes(std::move(nodes), root);
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_nodes(std::vector<Node> nodes,
                                                                   int32_t root) {
  if (root < 0 || root >= static_cast<int32_t>(nodes.size())) {
    return Status::internal("grammar: root node out of range");
  }
  flatten_unions(nodes);
  const std::vector<bool> productive = productive_nodes(nodes);
  if (!productive[root]) {
    return Status::invalid_argument("schema: no JSON value satisfies the schema");
  }
  prune(nodes, productive);
  return std::shared_ptr<const JsonGrammar>(new JsonGrammar(std::move(nodes), root));
}

}  // namespace minfer::grammar
