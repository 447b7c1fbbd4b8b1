// node_error and node_meta: the message names the node and its op, and a
// node without the metadata its op needs is an internal error, not a crash.
#include <gtest/gtest.h>

#include "graph/node_status.h"

namespace minfer::graph {
namespace {

Node matmul_node() {
  Node n;
  n.op = Op::kMatMul;
  n.name = "blk.3.attn_q";
  return n;
}

TEST(NodeStatus, ErrorNamesTheNodeAndItsOp) {
  const Status s = node_error(matmul_node(), "weight 'w' not found");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), std::string("node 'blk.3.attn_q' (") + op_name(Op::kMatMul) +
                             "): weight 'w' not found");
}

TEST(NodeStatus, MetaOfTheWrongKindIsAnError) {
  const Node n = matmul_node();  // no metadata set
  const Result<const MatMulMeta*> m = node_meta<MatMulMeta>(n);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("'blk.3.attn_q'"), std::string::npos);
  EXPECT_NE(m.status().message().find("missing metadata"), std::string::npos);
}

TEST(NodeStatus, MetaOfTheRightKindIsTheNodesOwn) {
  Node n = matmul_node();
  MatMulMeta meta;
  meta.weight = "w";
  meta.in_dim = 896;
  n.meta = meta;
  const Result<const MatMulMeta*> m = node_meta<MatMulMeta>(n);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m.value(), std::get_if<MatMulMeta>(&n.meta));
  EXPECT_EQ(m.value()->in_dim, 896);
}

}  // namespace
}  // namespace minfer::graph
