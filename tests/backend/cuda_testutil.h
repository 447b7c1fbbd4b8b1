// Helpers for the CUDA backend tests: skip without a device, build a weight
// table from host data, and run one graph node on any backend with host
// inputs, returning its output.
//
// Every test that needs the GPU starts with MINFER_SKIP_WITHOUT_CUDA(): on a
// machine without a CUDA device (or a build without CUDA) it is skipped with
// the reason, so the suite stays green on CPU-only CI.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "graph/ir.h"
#include "model/weights.h"
#include "quant/reference.h"

#define MINFER_SKIP_WITHOUT_CUDA()                                                \
  do {                                                                            \
    if (!::minfer::cuda::available()) {                                           \
      GTEST_SKIP() << "no CUDA device: " << ::minfer::cuda::unavailable_reason(); \
    }                                                                             \
  } while (0)

namespace minfer::cuda::testing {

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

inline void make_kv(backend::Backend& b, graph::DType type, int64_t n_ctx, int64_t row,
                    const std::vector<std::byte>& k, const std::vector<std::byte>& v,
                    KvRegions& out) {
  const size_t bytes = static_cast<size_t>(n_ctx * row) * graph::dtype_size(type);
  const auto cache_type =
      type == graph::DType::kF16 ? quant::TensorType::F16 : quant::TensorType::F32;
  out.owner = &b;
  out.pair.k = b.alloc_buffer(bytes).value();
  out.pair.v = b.alloc_buffer(bytes).value();
  out.pair.k_type = out.pair.v_type = cache_type;
  out.pair.n_ctx = n_ctx;
  ASSERT_TRUE(b.write_host(out.pair.k, 0, k).is_ok());
  ASSERT_TRUE(b.write_host(out.pair.v, 0, v).is_ok());
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

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

}  // namespace minfer::cuda::testing
