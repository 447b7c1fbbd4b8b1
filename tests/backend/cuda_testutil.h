// Helpers for the CUDA backend tests: skip without a device, build a weight
// table from host data, the metas the tests build nodes from, run one graph
// node on any backend with host inputs, returning its output, and set an
// environment variable for a scope. The names every CUDA test uses
// (random_floats, Node, Op, TensorType) are declared here for them.
//
// Every test that needs the GPU starts with MINFER_SKIP_WITHOUT_CUDA(): on a
// machine without a CUDA device (or a build without CUDA) it is skipped with
// the reason, so the suite stays green on CPU-only CI.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/registry.h"
#include "base/options.h"
#include "graph/ir.h"
#include "model/weights.h"
#include "quant/reference.h"
#include "scoped_env.h"

#define MINFER_SKIP_WITHOUT_CUDA()                                                \
  do {                                                                            \
    if (!::minfer::cuda::available()) {                                           \
      GTEST_SKIP() << "no CUDA device: " << ::minfer::cuda::unavailable_reason(); \
    }                                                                             \
  } while (0)

namespace minfer::cuda::testing {

using cpu::testing::random_floats;
using graph::Node;
using graph::Op;
using quant::TensorType;

// The MINFER_* switches as the environment sets them now: the tests switch
// backend variants with ScopedEnv and hand the result to what they create.
inline Options env_options() {
  auto o = Options::from_env(backend::option_sections());
  EXPECT_TRUE(o.is_ok()) << o.message();
  return o ? *o : Options{};
}

// The GPU backend and the CPU backend over one weight table (fill `weights`
// before start()).
struct Backends {
  model::Weights weights;
  std::unique_ptr<backend::Backend> gpu;
  std::unique_ptr<cpu::CpuBackend> cpu;
  void start() {
    auto g = create_backend(weights, env_options());
    ASSERT_TRUE(g.is_ok()) << g.message();
    gpu = std::move(g).value();
    cpu = std::make_unique<cpu::CpuBackend>(weights, 2);
  }
};

// A node of `op` with output shape [ne1][ne0], named "test.<op>".
inline graph::Node make_node(graph::Op op, int64_t ne0, int64_t ne1, graph::NodeMeta meta = {}) {
  graph::Node n;
  n.op = op;
  n.shape.ne = {ne0, ne1};
  n.meta = std::move(meta);
  n.name = std::string("test.") + graph::op_name(op);
  return n;
}

// A FusedQKV meta over weights "wq", "wk", "wv" (and v bias `v_bias`):
// n_head query heads of head_dim, full RoPE of base 1e4; the caller sets kv.
inline graph::FusedQkvMeta qkv_meta(int64_t in_dim, int64_t n_head, int64_t head_dim,
                                    std::string v_bias = "") {
  graph::FusedQkvMeta m;
  m.q_weight = "wq";
  m.k_weight = "wk";
  m.v_weight = "wv";
  m.v_bias = std::move(v_bias);
  m.in_dim = in_dim;
  m.n_head = n_head;
  m.rope.n_heads = n_head;
  m.rope.head_dim = head_dim;
  m.rope.n_rot = head_dim;
  m.rope.freq_base = 1e4f;
  return m;
}

// An Attention meta: n_head query heads over n_head_kv K/V heads of head_dim,
// caches of k_type / v_type, scale 1 / sqrt(head_dim); the rest as defaulted.
inline graph::AttentionMeta attention_meta(int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                                           TensorType k_type = TensorType::F32,
                                           TensorType v_type = TensorType::F32) {
  graph::AttentionMeta am;
  am.n_head = n_head;
  am.n_head_kv = n_head_kv;
  am.head_dim = head_dim;
  am.k_type = k_type;
  am.v_type = v_type;
  am.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return am;
}

// Positions first, first + 1, ..., first + n - 1.
inline std::vector<int32_t> iota_positions(int64_t n, int32_t first) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = first + static_cast<int32_t>(i);
  return p;
}

using ::minfer::testing::ScopedEnv;

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Adds an [rows][row_len] tensor of `type`, encoded from f32 values.
inline void add_weight(model::Weights& w, const std::string& name, quant::TensorType type,
                       int64_t rows, int64_t row_len, const std::vector<float>& values) {
  std::vector<uint8_t> data;
  if (type == quant::TensorType::F32) {
    data.resize(values.size() * sizeof(float));
    std::memcpy(data.data(), values.data(), data.size());
  } else {
    const size_t rb = quant::row_bytes(type, row_len).value();
    data.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const Status s = quant::quantize_row(type, values.data() + r * row_len,
                                           data.data() + static_cast<size_t>(r) * rb, row_len);
      EXPECT_TRUE(s.is_ok()) << s.message();
    }
  }
  std::vector<int64_t> dims =
      rows == 1 ? std::vector<int64_t>{row_len} : std::vector<int64_t>{row_len, rows};
  const Status s = w.add_derived(name, type, std::move(dims), std::move(data));
  EXPECT_TRUE(s.is_ok()) << s.message();
}

// F32 weights "wq" [q_dim][in_dim], "wk" and "wv" [kv_row][in_dim] (qkv_meta's
// names), random of scale 0.1 from seeds seed, seed + 1, seed + 2.
inline void add_qkv_weights(model::Weights& w, int64_t in_dim, int64_t q_dim, int64_t kv_row,
                            uint32_t seed) {
  add_weight(w, "wq", TensorType::F32, q_dim, in_dim, random_floats(q_dim * in_dim, seed, 0.1f));
  add_weight(w, "wk", TensorType::F32, kv_row, in_dim,
             random_floats(kv_row * in_dim, seed + 1, 0.1f));
  add_weight(w, "wv", TensorType::F32, kv_row, in_dim,
             random_floats(kv_row * in_dim, seed + 2, 0.1f));
}

// Tensor `name` of w as the GPU sees it: encoded, then decoded by the
// reference (quant::dequantize_row), [rows][row_len] floats.
inline std::vector<float> dequantized(const model::Weights& w, const std::string& name) {
  const model::WeightView* v = w.find(name);
  std::vector<float> out(static_cast<size_t>(v->rows() * v->row_length()));
  for (int64_t r = 0; r < v->rows(); ++r) {
    const Status s = quant::dequantize_row(v->type, v->data + r * v->row_bytes(),
                                           out.data() + r * v->row_length(), v->row_length());
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return out;
}

// The persistent KV regions of one layer on one backend, filled from host data.
struct KvRegions {
  backend::Backend* owner = nullptr;
  backend::KvPair pair;
  ~KvRegions() {
    if (owner != nullptr) {
      owner->free_buffer(pair.k);
      owner->free_buffer(pair.v);
    }
  }
};

// K and V regions of n_ctx rows of `row` elements of k_type / v_type (F32,
// F16 or Q8_0), filled with the given bytes.
inline void make_kv(backend::Backend& b, quant::TensorType k_type, quant::TensorType v_type,
                    int64_t n_ctx, int64_t row, const std::vector<std::byte>& k,
                    const std::vector<std::byte>& v, KvRegions& out) {
  auto region_bytes = [&](quant::TensorType t) {
    return static_cast<size_t>(n_ctx) * quant::row_bytes(t, row).value();
  };
  out.owner = &b;
  out.pair.k = b.alloc_buffer(region_bytes(k_type)).value();
  out.pair.v = b.alloc_buffer(region_bytes(v_type)).value();
  out.pair.k_type = k_type;
  out.pair.v_type = v_type;
  out.pair.n_ctx = n_ctx;
  ASSERT_EQ(k.size(), region_bytes(k_type));
  ASSERT_EQ(v.size(), region_bytes(v_type));
  ASSERT_TRUE(b.write_host(out.pair.k, 0, k).is_ok());
  ASSERT_TRUE(b.write_host(out.pair.v, 0, v).is_ok());
}

inline void make_kv(backend::Backend& b, graph::DType type, int64_t n_ctx, int64_t row,
                    const std::vector<std::byte>& k, const std::vector<std::byte>& v,
                    KvRegions& out) {
  const auto cache_type =
      type == graph::DType::kF16 ? quant::TensorType::F16 : quant::TensorType::F32;
  make_kv(b, cache_type, cache_type, n_ctx, row, k, v, out);
}

// Rows of `row` f32 values encoded as `type` (F32, F16 or Q8_0) with the CPU
// reference (quant::quantize_row), and the values those bytes decode to.
inline std::vector<std::byte> encode_rows(quant::TensorType type, const std::vector<float>& x,
                                          int64_t row) {
  const size_t rb = quant::row_bytes(type, row).value();
  const int64_t n_rows = static_cast<int64_t>(x.size()) / row;
  std::vector<std::byte> out(rb * static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const Status s = quant::quantize_row(type, x.data() + r * row,
                                         out.data() + static_cast<size_t>(r) * rb, row);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return out;
}

inline std::vector<float> decode_rows(quant::TensorType type, const std::vector<std::byte>& bytes,
                                      int64_t row) {
  const size_t rb = quant::row_bytes(type, row).value();
  const size_t n_rows = bytes.size() / rb;
  std::vector<float> out(n_rows * static_cast<size_t>(row));
  for (size_t r = 0; r < n_rows; ++r) {
    const Status s = quant::dequantize_row(type, bytes.data() + r * rb,
                                           out.data() + r * static_cast<size_t>(row), row);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return out;
}

inline std::vector<std::byte> read_all(backend::Backend& b, backend::BufferId id) {
  std::vector<std::byte> out(b.buffer_size(id));
  const Status s = b.read_host(id, 0, out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

// Runs `node` on `b`: one buffer per input (an empty vector: no value), the
// output read back as floats. `in_place` makes the output share input 0's buffer.
inline Result<std::vector<float>> run_node(backend::Backend& b, const graph::Node& node,
                                           const std::vector<std::vector<std::byte>>& inputs,
                                           const backend::KvPair* kv = nullptr,
                                           bool in_place = false) {
  std::vector<backend::BufferId> ids;
  auto release = [&] {
    for (auto id : ids) {
      if (id != backend::kNoBuffer) b.free_buffer(id);
    }
  };
  for (const auto& in : inputs) {
    if (in.empty()) {
      ids.push_back(backend::kNoBuffer);
      continue;
    }
    auto id = b.alloc_buffer(in.size());
    if (!id.is_ok()) return id.status();
    ids.push_back(*id);
    MINFER_RETURN_IF_ERROR(b.write_host(*id, 0, in));
  }
  backend::BufferId out = backend::kNoBuffer;
  if (node.bytes() > 0) {
    if (in_place) {
      out = ids[0];
    } else {
      auto id = b.alloc_buffer(node.bytes());
      if (!id.is_ok()) return id.status();
      out = *id;
    }
  }
  Status s = b.execute_node(node, ids, out, kv);
  if (s.is_ok()) s = b.synchronize();
  std::vector<float> result(node.bytes() / sizeof(float));
  if (s.is_ok() && node.bytes() > 0) {
    s = b.read_host(out, 0, std::as_writable_bytes(std::span(result)));
  }
  if (out != backend::kNoBuffer && !in_place) b.free_buffer(out);
  release();
  if (!s.is_ok()) return s;
  return result;
}

// max |a[i] - b[i]| in double; b: f32 results or a double reference.
template <typename T>
double max_abs_diff(const std::vector<float>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

}  // namespace minfer::cuda::testing
