// attention() from backend/cpu/ops.h: llama.cpp's CPU flash-attention loops
// (ggml_compute_forward_flash_attn_ext_f16's per-row and tiled paths) for one
// query row and head at a time, with an online softmax.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cpu/quantize_acts.h"
#include "backend/cpu/vec_dot.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/reference.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MINFER_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::cpu {
namespace {

// ggml's vector helpers process chunks of 32 elements with FMA and the
// remainder with separate multiply and add; both versions below do exactly
// that, so the ISA never changes the result.
constexpr int64_t kStep = 32;

void mad_f32_scalar(int64_t n, float* y, const float* x, float v) {
  const int64_t np = n & ~(kStep - 1);
  for (int64_t i = 0; i < np; ++i) y[i] = std::fma(x[i], v, y[i]);
  for (int64_t i = np; i < n; ++i) y[i] += x[i] * v;
}

// The tiled (>= 64 queries) path: an f16 V row widened and accumulated into an
// f32 sum, so an f16 cache costs only the rounding of the stored values, as in
// llama.cpp's tiled CPU flash attention (docs/PARITY.md).
void mad_f16_scalar(int64_t n, float* y, const uint16_t* x, float v) {
  const int64_t np = n & ~(kStep - 1);
  for (int64_t i = 0; i < np; ++i) y[i] = std::fma(quant::f16_to_f32(x[i]), v, y[i]);
  for (int64_t i = np; i < n; ++i) y[i] += quant::f16_to_f32(x[i]) * v;
}

// The half-precision row path: the running V sum itself is kept in f16, each
// update rounded, as llama.cpp's per-row flash attention does for f16 caches.
void mad_into_f16_scalar(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  using quant::f16_to_f32;
  using quant::f32_to_f16;
  const int64_t np = n & ~(kStep - 1);
  for (int64_t i = 0; i < np; ++i)
    y[i] = f32_to_f16(std::fma(f16_to_f32(x[i]), v, f16_to_f32(y[i])));
  for (int64_t i = np; i < n; ++i) y[i] = f32_to_f16(f16_to_f32(y[i]) + f16_to_f32(x[i]) * v);
}

// f16 -> f32 is exact: every version gives the same floats.
void widen_f16_scalar(int64_t n, float* y, const uint16_t* x) {
  for (int64_t i = 0; i < n; ++i) y[i] = quant::f16_to_f32(x[i]);
}

void scale_f16_scalar(int64_t n, uint16_t* y, float v) {
  for (int64_t i = 0; i < n; ++i) y[i] = quant::f32_to_f16(quant::f16_to_f32(y[i]) * v);
}

#if defined(MINFER_AVX2)
MINFER_AVX2 void mad_f32_avx2(int64_t n, float* y, const float* x, float v) {
  const int64_t np = n & ~(kStep - 1);
  const __m256 vv = _mm256_set1_ps(v);
  for (int64_t i = 0; i < np; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vv, _mm256_loadu_ps(y + i)));
  }
  for (int64_t i = np; i < n; ++i) y[i] += x[i] * v;
}

MINFER_AVX2 __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

MINFER_AVX2 void store_f16(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

MINFER_AVX2 void mad_into_f16_avx2(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  const int64_t np = n & ~(kStep - 1);
  const __m256 vv = _mm256_set1_ps(v);
  for (int64_t i = 0; i < np; i += 8)
    store_f16(y + i, _mm256_fmadd_ps(load_f16(x + i), vv, load_f16(y + i)));
  for (int64_t i = np; i < n; ++i) {
    y[i] = quant::f32_to_f16(quant::f16_to_f32(y[i]) + quant::f16_to_f32(x[i]) * v);
  }
}

MINFER_AVX2 void scale_f16_avx2(int64_t n, uint16_t* y, float v) {
  const int64_t np = n & ~int64_t{7};
  const __m256 vv = _mm256_set1_ps(v);
  for (int64_t i = 0; i < np; i += 8) store_f16(y + i, _mm256_mul_ps(load_f16(y + i), vv));
  for (int64_t i = np; i < n; ++i) y[i] = quant::f32_to_f16(quant::f16_to_f32(y[i]) * v);
}

MINFER_AVX2 void widen_f16_avx2(int64_t n, float* y, const uint16_t* x) {
  const int64_t np = n & ~int64_t{7};
  for (int64_t i = 0; i < np; i += 8) _mm256_storeu_ps(y + i, load_f16(x + i));
  for (int64_t i = np; i < n; ++i) y[i] = quant::f16_to_f32(x[i]);
}

MINFER_AVX2 void mad_f16_avx2(int64_t n, float* y, const uint16_t* x, float v) {
  const int64_t np = n & ~(kStep - 1);
  const __m256 vv = _mm256_set1_ps(v);
  for (int64_t i = 0; i < np; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(load_f16(x + i), vv, _mm256_loadu_ps(y + i)));
  }
  for (int64_t i = np; i < n; ++i) y[i] += quant::f16_to_f32(x[i]) * v;
}
#endif

struct Kernels {
  DotFn kq_dot;      // f32 cache row . query
  DotFn kq_dot_f32;  // batch row (f32) . query
  DotFn kq_dot_f16;  // f16 cache row . f16-rounded query (per-row path)
  DotFn kq_dot_q8;   // q8_0 cache row . q8_0-quantized query (per-row path)
  void (*mad_f32)(int64_t, float*, const float*, float);
  void (*mad_f16)(int64_t, float*, const uint16_t*, float);
  void (*mad_into_f16)(int64_t, uint16_t*, const uint16_t*, float);
  void (*scale_f16)(int64_t, uint16_t*, float);
  void (*widen_f16)(int64_t, float*, const uint16_t*);
};

Kernels pick_kernels() {
  const Isa isa = active_isa();
  Kernels k{dot_kernel(quant::TensorType::F32, isa),
            dot_kernel(quant::TensorType::F32, isa),
            dot_kernel(quant::TensorType::F16, isa),
            dot_kernel(quant::TensorType::Q8_0, isa),
            mad_f32_scalar,
            mad_f16_scalar,
            mad_into_f16_scalar,
            scale_f16_scalar,
            widen_f16_scalar};
#if defined(MINFER_AVX2)
  if (isa == Isa::kAvx2) {
    k.mad_f32 = mad_f32_avx2;
    k.mad_f16 = mad_f16_avx2;
    k.mad_into_f16 = mad_into_f16_avx2;
    k.scale_f16 = scale_f16_avx2;
    k.widen_f16 = widen_f16_avx2;
  }
#endif
  return k;
}

struct Scratch {
  explicit Scratch(int64_t d) : acc32(d), q16(d), acc16(d), k32(d), v32(d), q8(d / quant::kQK) {}
  std::vector<float> acc32;
  std::vector<uint16_t> q16, acc16;
  std::vector<float> k32;            // an f16 cache row widened to f32
  std::vector<float> v32;            // a q8_0 V row dequantized
  std::vector<quant::BlockQ8_0> q8;  // the query quantized for a q8_0 K
};

struct HeadJob {
  const float* q;    // this query row and head
  const uint8_t* k;  // kv head's first element in row 0 of the cache
  const uint8_t* v;
  size_t k_row_bytes, v_row_bytes;  // bytes between cache rows
  int64_t j_begin, j_end;           // visible keys
  float* out;
  const float* batch_k;  // kv head's first element in the batch's row 0 (null: none)
  const float* batch_v;
  int64_t batch_first;             // position of the batch's row 0
  int64_t batch_row;               // floats between batch rows
  const int32_t* pages = nullptr;  // this query's page-table row (null: row j = position j)
  int64_t page_size = 0;
  const float* sink = nullptr;  // this head's sink logit (null: none)
};

// The cache row holding position j for this query.
inline int64_t cache_row(const HeadJob& job, int64_t j) {
  if (job.pages == nullptr) return j;
  return static_cast<int64_t>(job.pages[j / job.page_size]) * job.page_size + j % job.page_size;
}

// x[i] = d * q[i] per block, as ggml's dequantize_row_q8_0 (and quant/reference).
void dequantize_q8_0(const uint8_t* row, int64_t n, float* y) {
  for (int64_t b = 0; b < n / quant::kQK; ++b) {
    quant::BlockQ8_0 blk;
    std::memcpy(&blk, row + b * sizeof(blk), sizeof(blk));
    const float d = quant::f16_to_f32(blk.d);
    for (int64_t i = 0; i < quant::kQK; ++i) y[b * quant::kQK + i] = blk.qs[i] * d;
  }
}

// The query in K's dot type and the dot kernel that reads it; false if a
// q8_0 query could not be quantized (a non-finite value).
bool query_for_k(const HeadJob& job, int64_t d, KvType k_type, const Kernels& k, Scratch& scratch,
                 const void*& q_vec, DotFn& dot) {
  switch (k_type) {
    case KvType::kF32:
      q_vec = job.q;
      dot = k.kq_dot;
      return true;
    case KvType::kF16:
      for (int64_t i = 0; i < d; ++i) scratch.q16[i] = quant::f32_to_f16(job.q[i]);
      q_vec = scratch.q16.data();
      dot = k.kq_dot_f16;
      return true;
    case KvType::kQ8_0:
      q_vec = scratch.q8.data();
      dot = k.kq_dot_q8;
      return quantize_activations(quant::TensorType::Q8_0, job.q, scratch.q8.data(), d).is_ok();
  }
  return false;
}

// Folds a sink logit into a finished online softmax (running max m, sum,
// f32 V sum acc) as one more key without a value, in llama.cpp's order: when
// the sink is the new maximum, what was accumulated is rescaled to it and the
// sink adds exp(0) = 1; else it adds expf(sink - m). With no key seen (m =
// -inf) the rescale zeroes acc and sum becomes 1, so the row stays 0.
void fold_sink(float sink, float m, int64_t d, float* acc, float& sum) {
  if (sink > m) {
    const float ms = std::exp(m - sink);
    for (int64_t i = 0; i < d; ++i) acc[i] *= ms;
    sum = sum * ms + 1.0f;
  } else {
    sum = sum + std::exp(sink - m);
  }
}

// The per-row path (AttentionShape::per_row): every key from the cache, the
// query in K's dot type, the V sum in f16 for an f16 V and in f32 otherwise.
void attend_rows(const HeadJob& job, const AttentionShape& s, KvType k_type, KvType v_type,
                 const Kernels& k, Scratch& scratch) {
  const int64_t d = s.head_dim;
  const void* q_vec = nullptr;
  DotFn dot = nullptr;
  if (!query_for_k(job, d, k_type, k, scratch, q_vec, dot)) {
    std::fill(job.out, job.out + d, NAN);  // a non-finite query poisons its output
    return;
  }
  const bool v16 = v_type == KvType::kF16;
  std::fill(scratch.acc16.begin(), scratch.acc16.end(), uint16_t{0});
  std::fill(scratch.acc32.begin(), scratch.acc32.end(), 0.0f);
  float m = -INFINITY;
  float sum = 0.0f;
  for (int64_t j = job.j_begin; j < job.j_end; ++j) {
    const int64_t row = cache_row(job, j);
    const float sc = dot(d, job.k + row * job.k_row_bytes, q_vec) * s.scale;
    const float m_old = m;
    float ms = 1.0f;
    float vs = 1.0f;
    if (sc > m) {
      m = sc;
      ms = std::exp(m_old - m);
      if (v16) {
        k.scale_f16(d, scratch.acc16.data(), ms);
      } else {
        for (int64_t i = 0; i < d; ++i) scratch.acc32[i] *= ms;
      }
    } else {
      vs = std::exp(sc - m);
    }
    const uint8_t* v_row = job.v + row * job.v_row_bytes;
    if (v16) {
      k.mad_into_f16(d, scratch.acc16.data(), reinterpret_cast<const uint16_t*>(v_row), vs);
    } else if (v_type == KvType::kQ8_0) {
      dequantize_q8_0(v_row, d, scratch.v32.data());
      k.mad_f32(d, scratch.acc32.data(), scratch.v32.data(), vs);
    } else {
      k.mad_f32(d, scratch.acc32.data(), reinterpret_cast<const float*>(v_row), vs);
    }
    sum = sum * ms + vs;
  }
  // An f16 V sum is widened (exactly) first, so the sink rescales f32 values.
  float* acc = scratch.acc32.data();
  if (v16) k.widen_f16(d, acc, scratch.acc16.data());
  if (job.sink != nullptr) fold_sink(*job.sink, m, d, acc, sum);
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int64_t i = 0; i < d; ++i) job.out[i] = acc[i] * inv;
}

// The tiled path: K and V both f32 or both f16 (`f16`); f32 sums; batch rows
// from batch_k/batch_v when given. See ops.h for the numerics.
void attend_tiled(const HeadJob& job, const AttentionShape& s, bool f16, const Kernels& k,
                  Scratch& scratch) {
  const int64_t d = s.head_dim;
  const void* q_vec = job.q;
  std::fill(scratch.acc32.begin(), scratch.acc32.end(), 0.0f);
  float m = -INFINITY;
  float sum = 0.0f;
  for (int64_t j = job.j_begin; j < job.j_end; ++j) {
    const bool from_batch = job.batch_k != nullptr && j >= job.batch_first;
    const int64_t b = j - job.batch_first;
    const int64_t row = cache_row(job, j);
    const uint8_t* k_row = job.k + row * job.k_row_bytes;
    float sc = 0.0f;
    if (from_batch) {
      sc = k.kq_dot_f32(d, job.batch_k + b * job.batch_row, q_vec);
    } else if (f16) {
      // Widen, then the f32 kernel: exactly the result an f32 cache holding
      // the same (rounded) values gives.
      k.widen_f16(d, scratch.k32.data(), reinterpret_cast<const uint16_t*>(k_row));
      sc = k.kq_dot_f32(d, scratch.k32.data(), q_vec);
    } else {
      sc = k.kq_dot(d, k_row, q_vec);
    }
    sc *= s.scale;
    const float m_old = m;
    float ms = 1.0f;  // rescales what was accumulated when the max grows
    float vs = 1.0f;  // this key's weight, expf(sc - m)
    if (sc > m) {
      m = sc;
      ms = std::exp(m_old - m);
      for (int64_t i = 0; i < d; ++i) scratch.acc32[i] *= ms;
    } else {
      vs = std::exp(sc - m);
    }
    const uint8_t* v_row = job.v + row * job.v_row_bytes;
    if (from_batch) {
      k.mad_f32(d, scratch.acc32.data(), job.batch_v + b * job.batch_row, vs);
    } else if (f16) {
      k.mad_f16(d, scratch.acc32.data(), reinterpret_cast<const uint16_t*>(v_row), vs);
    } else {
      k.mad_f32(d, scratch.acc32.data(), reinterpret_cast<const float*>(v_row), vs);
    }
    sum = sum * ms + vs;
  }
  if (job.sink != nullptr) fold_sink(*job.sink, m, d, scratch.acc32.data(), sum);
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int64_t i = 0; i < d; ++i) job.out[i] = scratch.acc32[i] * inv;
}

Status validate(const float* q, const void* k_cache, KvType k_type, const void* v_cache,
                KvType v_type, const int32_t* positions, const AttentionShape& s,
                const float* out) {
  const std::string dims =
      "n_tokens " + std::to_string(s.n_tokens) + ", n_kv " + std::to_string(s.n_kv) + ", n_head " +
      std::to_string(s.n_head) + ", n_head_kv " + std::to_string(s.n_head_kv) + ", head_dim " +
      std::to_string(s.head_dim) + ", window " + std::to_string(s.sliding_window);
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0 || s.n_tokens < 0 || s.n_kv < 0 ||
      s.sliding_window < 0) {
    return Status::internal("attention: invalid shape (" + dims + ")");
  }
  if (s.n_head % s.n_head_kv != 0) {
    return Status::internal("attention: n_head is not a multiple of n_head_kv (" + dims + ")");
  }
  if ((k_type == KvType::kQ8_0 || v_type == KvType::kQ8_0) && s.head_dim % quant::kQK != 0) {
    return Status::internal("attention: a q8_0 KV cache needs head_dim a multiple of 32 (" + dims +
                            ")");
  }
  if (s.n_tokens > 0 && (q == nullptr || out == nullptr || positions == nullptr ||
                         (s.n_kv > 0 && (k_cache == nullptr || v_cache == nullptr)))) {
    return Status::internal("attention: null buffer (" + dims + ")");
  }
  return Status::ok();
}

}  // namespace

size_t kv_bytes(KvType type, int64_t n) {
  switch (type) {
    case KvType::kF32:
      return static_cast<size_t>(n) * sizeof(float);
    case KvType::kF16:
      return static_cast<size_t>(n) * sizeof(uint16_t);
    case KvType::kQ8_0:
      return static_cast<size_t>(n / quant::kQK) * sizeof(quant::BlockQ8_0);
  }
  return 0;
}

Status attention(const float* q, const void* k_cache, KvType k_type, const void* v_cache,
                 KvType v_type, const int32_t* positions, const AttentionShape& shape, float* out,
                 ThreadPool& pool) {
  MINFER_RETURN_IF_ERROR(validate(q, k_cache, k_type, v_cache, v_type, positions, shape, out));
  if (shape.n_kv == 0) {  // no key is visible to anyone
    std::fill(out, out + shape.n_tokens * shape.n_head * shape.head_dim, 0.0f);
    return Status::ok();
  }
  const Kernels kernels = pick_kernels();
  // llama.cpp takes its tiled path only for equal f32/f16 K and V types.
  const bool tiled = !shape.per_row && k_type == v_type && k_type != KvType::kQ8_0;
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t q_row = shape.n_head * shape.head_dim;
  const int64_t kv_row = shape.n_head_kv * shape.head_dim;
  const size_t k_row_bytes = kv_bytes(k_type, kv_row);
  const size_t v_row_bytes = kv_bytes(v_type, kv_row);
  const bool batch = tiled && shape.batch_k != nullptr && shape.batch_v != nullptr;
  pool.parallel_for(shape.n_tokens * shape.n_head, [&](int64_t begin, int64_t end, int) {
    Scratch scratch(shape.head_dim);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / shape.n_head;
      const int64_t h = task % shape.n_head;
      const int64_t pos = positions[t];
      int64_t j_begin = 0;
      if (shape.sliding_window > 0) j_begin = std::max<int64_t>(0, pos - shape.sliding_window + 1);
      const int64_t j_end = std::clamp<int64_t>(pos + 1, 0, shape.n_kv);
      const int64_t kv_head = (h / group) * shape.head_dim;  // element offset in a row
      const HeadJob job{q + t * q_row + h * shape.head_dim,
                        static_cast<const uint8_t*>(k_cache) + kv_bytes(k_type, kv_head),
                        static_cast<const uint8_t*>(v_cache) + kv_bytes(v_type, kv_head),
                        k_row_bytes,
                        v_row_bytes,
                        j_begin,
                        std::max(j_begin, j_end),
                        out + t * q_row + h * shape.head_dim,
                        batch ? shape.batch_k + kv_head : nullptr,
                        batch ? shape.batch_v + kv_head : nullptr,
                        shape.batch_first,
                        kv_row,
                        shape.page_table == nullptr
                            ? nullptr
                            : shape.page_table + shape.seq_slots[t] * shape.max_pages,
                        shape.page_size,
                        shape.sinks == nullptr ? nullptr : shape.sinks + h};
      if (tiled) {
        attend_tiled(job, shape, k_type == KvType::kF16, kernels, scratch);
      } else {
        attend_rows(job, shape, k_type, v_type, kernels, scratch);
      }
    }
  });
  return Status::ok();
}

}  // namespace minfer::cpu
