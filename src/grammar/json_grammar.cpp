#include "grammar/json_grammar.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <utility>

#include "grammar/recognizer.h"

namespace minfer::grammar {
namespace {

Node literal(std::string text) {
  Node n;
  n.kind = NodeKind::kLiteral;
  n.text = std::move(text);
  return n;
}

Status too_wide(size_t n) {
  return Status::invalid_argument("schema: a union (anyOf/oneOf, enum, a type list) of " +
                                  std::to_string(n) + " alternatives, more than kMaxBranching (" +
                                  std::to_string(kMaxBranching) + ")");
}

// Replaces every union's alternatives by the non-union nodes it reaches
// through unions (cycles of unions reach nothing new). A union already
// flattened holds its whole reach, so a later walk takes its list instead of
// walking it again: the cost is the list sizes plus the unions that are not
// yet flattened (only those below a `$ref` placeholder, whose id precedes its
// body's), not the square of the union count.
Status flatten_unions(std::vector<Node>& nodes) {
  const size_t n = nodes.size();
  std::vector<uint32_t> mark(n, 0);
  std::vector<bool> flattened(n, false);
  std::vector<int32_t> todo;
  std::vector<int32_t> flat;
  for (size_t u = 0; u < n; ++u) {
    if (nodes[u].kind != NodeKind::kUnion) continue;
    const auto stamp = static_cast<uint32_t>(u + 1);
    todo = nodes[u].alternatives;
    flat.clear();
    mark[u] = stamp;
    while (!todo.empty()) {
      const int32_t id = todo.back();
      todo.pop_back();
      if (id < 0 || mark[id] == stamp) continue;
      mark[id] = stamp;
      const Node& node = nodes[id];
      if (node.kind != NodeKind::kUnion) {
        flat.push_back(id);
      } else if (!flattened[id]) {
        todo.insert(todo.end(), node.alternatives.begin(), node.alternatives.end());
      } else {
        for (int32_t alt : node.alternatives) {
          if (mark[alt] != stamp) flat.push_back(alt);
          mark[alt] = stamp;
        }
      }
      if (flat.size() > kMaxBranching) return too_wide(flat.size());
    }
    std::sort(flat.begin(), flat.end());
    nodes[u].alternatives = flat;
    flattened[u] = true;
  }
  return Status::ok();
}

// The children every value of `node` contains (with repeats): required
// properties, and the items up to minItems. false if one of them is -1.
bool required_children(const Node& node, std::vector<int32_t>& out) {
  out.clear();
  if (node.kind == NodeKind::kObject) {
    for (const Property& p : node.properties) {
      if (p.required) out.push_back(p.value);
    }
  } else if (node.kind == NodeKind::kArray) {
    const int64_t n_prefix = static_cast<int64_t>(node.prefix_items.size());
    for (int64_t i = 0; i < std::min(node.min_items, n_prefix); ++i) {
      out.push_back(node.prefix_items[i]);
    }
    if (node.min_items > n_prefix) out.push_back(node.items);
  }
  return std::none_of(out.begin(), out.end(), [](int32_t id) { return id < 0; });
}

// The least fixpoint of min_nesting: a union takes its smallest alternative,
// an object or array 1 + its largest required child. Knuth's generalization
// of Dijkstra's algorithm: nodes are settled in increasing order, a union when
// its first alternative settles, an object or array when its last required
// child does. O(edges log nodes); no recursion.
std::vector<int32_t> min_nesting(const std::vector<Node>& nodes) {
  const size_t n = nodes.size();
  std::vector<int32_t> best(n, kUnsatisfiable);
  std::vector<int32_t> pending(n, 0);  // required children not settled yet
  std::vector<std::vector<int32_t>> parents(n);
  using Entry = std::pair<int32_t, int32_t>;  // (min_nesting, node)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  auto offer = [&](size_t id, int32_t value) {
    best[id] = value;
    queue.emplace(value, static_cast<int32_t>(id));
  };
  std::vector<int32_t> children;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    if (node.kind == NodeKind::kUnion) {
      for (int32_t alt : node.alternatives) {
        if (alt >= 0) parents[alt].push_back(static_cast<int32_t>(i));
      }
    } else if (node.kind == NodeKind::kString) {
      if (node.min_length <= node.max_length) offer(i, 0);
    } else if (node.kind != NodeKind::kObject && node.kind != NodeKind::kArray) {
      offer(i, 0);
    } else if (node.min_items <= node.max_items && required_children(node, children)) {
      pending[i] = static_cast<int32_t>(children.size());
      for (int32_t c : children) parents[c].push_back(static_cast<int32_t>(i));
      if (children.empty()) offer(i, 1);
    }
  }
  std::vector<bool> settled(n, false);
  while (!queue.empty()) {
    const auto [value, id] = queue.top();
    queue.pop();
    if (settled[id] || value != best[id]) continue;
    settled[id] = true;
    for (int32_t p : parents[id]) {
      if (settled[p]) continue;
      if (nodes[p].kind == NodeKind::kUnion) {
        if (value < best[p]) offer(p, value);
      } else if (--pending[p] == 0) {
        offer(p, value + 1);  // settled in order: this child is the largest
      }
    }
  }
  return best;
}

// Removes every reference to a node that needs more than kMaxNesting (or that
// nothing satisfies), so that the recognizer never enters a state from which
// no complete text can be reached.
void prune(std::vector<Node>& nodes, const std::vector<int32_t>& nesting) {
  auto ok = [&](int32_t id) { return id >= 0 && nesting[id] <= kMaxNesting; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& node = nodes[i];
    node.min_nesting = nesting[i];
    std::erase_if(node.alternatives, [&](int32_t id) { return !ok(id); });
    if (node.kind == NodeKind::kObject) {
      node.sorted_names.clear();
      for (const Property& p : node.properties) node.sorted_names.push_back(p.name);
      std::sort(node.sorted_names.begin(), node.sorted_names.end());
      std::erase_if(node.properties, [&](const Property& p) { return !ok(p.value); });
      if (!ok(node.additional)) node.additional = -1;
      const size_t n = node.properties.size();
      node.next_required.assign(n + 1, static_cast<int32_t>(n));
      for (size_t k = n; k-- > 0;) {
        node.next_required[k] =
            node.properties[k].required ? static_cast<int32_t>(k) : node.next_required[k + 1];
      }
    }
    if (node.kind == NodeKind::kArray) {
      for (size_t k = 0; k < node.prefix_items.size(); ++k) {
        if (!ok(node.prefix_items[k])) {
          node.prefix_items.resize(k);
          node.items = -1;
          break;
        }
      }
      if (!ok(node.items)) node.items = -1;
    }
  }
}

// How many key states a '"' may open in an object (recognizer.cpp
// start_key): the longest run of optional properties up to and including the
// next required one, plus one for an additional key.
size_t key_branching(const Node& node) {
  const auto n_props = static_cast<int32_t>(node.properties.size());
  size_t widest = 0;
  for (int32_t i = 0; i < n_props; ++i) {
    const int32_t last = std::min(node.next_required[i], n_props - 1);
    widest = std::max(widest, static_cast<size_t>(last - i + 1));
  }
  return widest + (node.additional >= 0 ? 1 : 0);
}

// kMaxBranching over the pruned graph: a union counts each object
// alternative as the keys it may start (they all open at the same '"').
Status check_branching(const std::vector<Node>& nodes) {
  for (const Node& node : nodes) {
    size_t states = 0;
    if (node.kind == NodeKind::kObject) {
      states = key_branching(node);
      if (states > kMaxBranching) {
        return Status::invalid_argument(
            "schema: an object whose keys may start with " + std::to_string(states) +
            " properties (a run of optional ones), more than kMaxBranching (" +
            std::to_string(kMaxBranching) + ")");
      }
    } else if (node.kind == NodeKind::kUnion) {
      for (int32_t alt : node.alternatives) {
        states += std::max<size_t>(
            1, nodes[alt].kind == NodeKind::kObject ? key_branching(nodes[alt]) : 1);
      }
      if (states > kMaxBranching) return too_wide(states);
    }
  }
  return Status::ok();
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
  if (nodes.size() > kMaxGrammarNodes) {
    return Status::invalid_argument("schema: " + std::to_string(nodes.size()) +
                                    " grammar nodes, more than kMaxGrammarNodes (" +
                                    std::to_string(kMaxGrammarNodes) + ")");
  }
  MINFER_RETURN_IF_ERROR(flatten_unions(nodes));
  const std::vector<int32_t> nesting = min_nesting(nodes);
  if (nesting[root] == kUnsatisfiable) {
    return Status::invalid_argument("schema: no JSON value satisfies the schema");
  }
  if (nesting[root] > kMaxNesting) {
    return Status::invalid_argument("schema: every value needs " + std::to_string(nesting[root]) +
                                    " levels of nested objects/arrays, more than kMaxNesting (" +
                                    std::to_string(kMaxNesting) + ")");
  }
  prune(nodes, nesting);
  MINFER_RETURN_IF_ERROR(check_branching(nodes));
  return std::shared_ptr<const JsonGrammar>(new JsonGrammar(std::move(nodes), root));
}

}  // namespace minfer::grammar
