// The op-conformance table: one Row per (op, types, shape) that every
// backend is run on (op_conformance_testutil.h says how a row runs and what
// its tolerance means).
//
// To check a new op: write a case builder (a CaseBuilder with feeders for
// its inputs, the node under test, and the output in double from
// reference_ops.h) and add its rows to the add_*_rows function of its family;
// the coverage test fails until every graph::Op has a row. A fused op is a
// row whose graph is the chain the fusion pass rewrites, with a Fusion the
// backend must make: the CPU runs the chain as the reference.
// A new backend needs no row: every registry kind is run on every row.
#pragma once

#include <vector>

#include "backend/op_conformance_testutil.h"

namespace minfer::conformance {

// Every row, in the order the census prints them.
const std::vector<Row>& conformance_rows();

// The families (op_conformance_rows*.cpp).
void add_dense_rows(std::vector<Row>& rows);  // get_rows, norms, matmuls, elementwise, argmax
void add_cache_rows(std::vector<Row>& rows);  // rope, KV store, attention, their fusions
void add_moe_rows(std::vector<Row>& rows);    // the mixture-of-experts ops

// Every weight type the engine loads (quant::is_weight_type), in id order.
std::vector<quant::TensorType> weight_types();

// The tolerance of a product over weights of `type` (dense or expert
// matmul), and of act(gate) * up over two such products.
Tolerance product_tolerance(quant::TensorType type);
Tolerance glu_tolerance(quant::TensorType type);

}  // namespace minfer::conformance
