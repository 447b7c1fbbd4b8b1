// Errors a backend reports about one node of the graph, and the node's
// metadata of the kind its op needs.
//
// Contract:
//   - node_error(n, what) is Status::internal naming the node and its op:
//     "node 'NAME' (OP): what". Every backend reports a node it cannot run
//     this way, so a log line points at the graph whatever ran it.
//   - node_meta<M>(n) is the node's metadata when it holds an M, else
//     node_error(n, "missing metadata").
#pragma once

#include <string>
#include <variant>

#include "base/status.h"
#include "graph/ir.h"

namespace minfer::graph {

inline Status node_error(const Node& n, const std::string& what) {
  return Status::internal("node '" + n.name + "' (" + op_name(n.op) + "): " + what);
}

template <typename M>
Result<const M*> node_meta(const Node& n) {
  const M* m = std::get_if<M>(&n.meta);
  if (m == nullptr) return node_error(n, "missing metadata");
  return m;
}

}  // namespace minfer::graph
