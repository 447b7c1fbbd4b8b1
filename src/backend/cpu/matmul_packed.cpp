// The packed AVX2 matmul of backend/cpu/matmul_packed.h. Every kernel
// function carries the AVX2 target attribute; packable() checks the CPU.
#include "backend/cpu/matmul_packed.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "backend/cpu/quantize_acts.h"
#include "backend/cpu/vec_dot.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;
using quant::TensorType;

constexpr int64_t kGroup = 8;           // rows per group
constexpr int64_t kGroupsPerTask = 2;   // 16 rows, as matmul()'s tasks
constexpr int64_t kTokensPerTask = 64;  // a task's tokens share its rows in L1
constexpr size_t kScaleBytes = kGroup * sizeof(uint16_t);
// Q4_K: d[8] and dmin[8] (f16), the 6-bit scales as bytes [sub-block][row],
// the mins as bytes [sub-block pair][row][2].
constexpr size_t kKHeaderBytes = 2 * kScaleBytes + 64 + 64;
// Q5_K: the Q4_K header, then per sub-block pair {the fifth bits of its low
// nibbles, of its high nibbles, its 8 nibble registers} (pack_q5_k).
constexpr size_t kQ5PairBytes = (2 + 8) * 32;
// Q6_K: d[8] (f16), the int8 scales as bytes [sub-block pair][row][2], then
// 16 triples of registers {high bits, nibbles, nibbles} (pack_q6_k).
constexpr size_t kQ6HeaderBytes = kScaleBytes + 128;
constexpr size_t kQ6TripleBytes = 3 * 32;

constexpr size_t group_block_bytes(TensorType t) {
  switch (t) {
    case TensorType::Q4_0:
      return kScaleBytes + 128;
    case TensorType::Q5_0:
      return kScaleBytes + 160;
    case TensorType::Q5_1:  // d, then m, then Q5_0's registers
      return 2 * kScaleBytes + 160;
    case TensorType::Q8_0:
      return kScaleBytes + 256;
    case TensorType::Q4_K:
      return kKHeaderBytes + 1024;
    case TensorType::Q5_K:
      return kKHeaderBytes + 4 * kQ5PairBytes;
    case TensorType::Q6_K:
      return kQ6HeaderBytes + 16 * kQ6TripleBytes;
    default:
      return 0;
  }
}

constexpr bool k_quant(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K;
}

// Q4_K and Q5_K: the activations' 32-element sums meet the mins.
constexpr bool has_mins(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K;
}

// Elements per (group-)block: 32, or a K-quant's 256-element super-block.
constexpr int64_t block_elems(TensorType t) {
  return k_quant(t) ? quant::kQK_K : quant::kQK;
}

// Q5_1: the activations are Q8_1 (their f16 s = d * sum meets the mins).
constexpr bool q8_1_acts(TensorType t) {
  return t == TensorType::Q5_1;
}

// Q5_0 and Q5_1 carry a register of fifth bits.
[[maybe_unused]] constexpr bool five_bit(TensorType t) {
  return t == TensorType::Q5_0 || t == TensorType::Q5_1;
}

// The 4/5-bit quants enter unsigned: the activation block's sum times this
// is subtracted from the integer sum.
int32_t quant_offset(TensorType t) {
  return t == TensorType::Q4_0 ? 8 : t == TensorType::Q5_0 ? 16 : 0;
}

// What the tiles take off each block's integer sum, per unit of sum(y): the
// stored offset (Q4_0, Q5_0), or the VNNI Q8_0 kernel's bias of 128.
int32_t sum_offset(TensorType t, bool vnni) {
  return t == TensorType::Q8_0 && vnni ? 128 : quant_offset(t);
}

// Row r's part of a Q4_K/Q5_K group-superblock header: d, dmin, the 6-bit
// scales as bytes [sub-block][row], the mins as bytes [pair][row][2].
template <typename Block>
void pack_k4_header(const Block* blk, int64_t r, uint8_t* out) {
  std::memcpy(out + r * 2, &blk->d, 2);
  std::memcpy(out + kScaleBytes + r * 2, &blk->dmin, 2);
  uint8_t* sc = out + 2 * kScaleBytes;
  uint8_t* mins = sc + 64;
  for (int s = 0; s < 8; ++s) {
    int scale = 0, min = 0;
    quant::detail::get_k4_scale_min(blk->scales, s, &scale, &min);
    sc[s * 8 + r] = static_cast<uint8_t>(scale);
    mins[(s / 2) * 16 + r * 2 + s % 2] = static_cast<uint8_t>(min);
  }
}

// One Q4_K group-superblock (layout above kKHeaderBytes; quants: sub-block
// pair j, register k, lane r = row r's qs[32j+4k..32j+4k+3]).
void pack_q4_k(const uint8_t* const* rows, int64_t n_rows, int64_t b, uint8_t* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(rows[r]) + b;
    pack_k4_header(blk, r, out);
    uint8_t* regs = out + kKHeaderBytes;
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 8; ++k) {
        std::memcpy(regs + (j * 8 + k) * 32 + r * 4, blk->qs + 32 * j + 4 * k, 4);
      }
    }
  }
}

// One Q5_K group-superblock: the Q4_K header, then per sub-block pair j
// (elements 64j..64j+63) two high-bit registers and Q4_K's eight nibble
// registers, in the order the kernel reads them. High-bit register h (0:
// the low nibbles, elements 64j + 4k + i; 1: the high ones, 64j + 32 + 4k +
// i) holds at lane r, byte i, bit k the fifth bit of that element of row r.
void pack_q5_k(const uint8_t* const* rows, int64_t n_rows, int64_t b, uint8_t* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blk = reinterpret_cast<const BlockQ5_K*>(rows[r]) + b;
    pack_k4_header(blk, r, out);
    for (int j = 0; j < 4; ++j) {
      uint8_t* pair = out + kKHeaderBytes + static_cast<size_t>(j) * kQ5PairBytes;
      for (int k = 0; k < 8; ++k) {
        std::memcpy(pair + (2 + k) * 32 + r * 4, blk->qs + 32 * j + 4 * k, 4);
        for (int i = 0; i < 4; ++i) {
          for (int h = 0; h < 2; ++h) {
            const int e = 64 * j + 32 * h + 4 * k + i;
            const int bit = quant::detail::get_hbit(blk->qh, e);
            pair[h * 32 + r * 4 + i] |= static_cast<uint8_t>(bit << k);
          }
        }
      }
    }
  }
}

// One Q6_K group-superblock. Sub-block pair j (elements 32j..32j+31) has
// nibble registers i = 0..3: lane r, byte b holds the low four bits of row
// r's element 32j + 4i + b (sub-block 2j) in its low nibble and of element
// 32j + 16 + 4i + b (sub-block 2j + 1) in its high nibble. Triple t = 2j + m
// (m = 0, 1) is {the high bits of nibble registers 2m and 2m + 1, those two
// registers}, in the order the kernel reads them (one stream): a high-bit
// byte holds the top two bits of the first register's low element (bits
// 0-1), its high element (2-3), the second's low (4-5) and high (6-7), so
// that shifts by 4, 2, 0 and -2 put each at bits 4-5.
void pack_q6_k(const uint8_t* const* rows, int64_t n_rows, int64_t b, uint8_t* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(rows[r]) + b;
    std::memcpy(out + r * 2, &blk->d, 2);
    uint8_t* sc = out + kScaleBytes;
    for (int s = 0; s < 16; ++s) {
      sc[(s / 2) * 16 + r * 2 + s % 2] = static_cast<uint8_t>(blk->scales[s]);
    }
    for (int e = 0; e < 256; ++e) {
      const int u = quant::detail::get_q6_low(blk->ql, e) | quant::detail::get_2bit(blk->qh, e)
                                                                << 4;
      const int j = e / 32, in_sub = e % 16, hi = (e % 32) / 16;  // hi: sub-block 2j + 1
      const int i = in_sub / 4, byte = in_sub % 4;
      uint8_t* triple = out + kQ6HeaderBytes + static_cast<size_t>(2 * j + i / 2) * kQ6TripleBytes;
      const size_t lane = static_cast<size_t>(r) * 4 + static_cast<size_t>(byte);
      triple[32 * (1 + i % 2) + lane] |= static_cast<uint8_t>((u & 0x0f) << (4 * hi));
      triple[lane] |= static_cast<uint8_t>((u >> 4) << (4 * (i % 2) + 2 * hi));
    }
  }
}

// One group-block from the eight (or fewer: the rest stay zero) source rows.
void pack_group_block(TensorType t, const uint8_t* const* rows, int64_t n_rows, int64_t b,
                      uint8_t* out) {
  std::memset(out, 0, group_block_bytes(t));
  if (t == TensorType::Q4_K) return pack_q4_k(rows, n_rows, b, out);
  if (t == TensorType::Q5_K) return pack_q5_k(rows, n_rows, b, out);
  if (t == TensorType::Q6_K) return pack_q6_k(rows, n_rows, b, out);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* regs = out + (t == TensorType::Q5_1 ? 2 * kScaleBytes : kScaleBytes);
    const size_t lane = static_cast<size_t>(r) * 4;
    if (t == TensorType::Q8_0) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      for (int c = 0; c < 8; ++c) std::memcpy(regs + c * 32 + lane, blk->qs + 4 * c, 4);
      continue;
    }
    const uint8_t* qs = nullptr;
    const uint8_t* qh_bytes = nullptr;
    if (t == TensorType::Q4_0) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      qs = blk->qs;
    } else if (t == TensorType::Q5_0) {
      const auto* blk = reinterpret_cast<const BlockQ5_0*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      qs = blk->qs;
      qh_bytes = blk->qh;
    } else {
      const auto* blk = reinterpret_cast<const BlockQ5_1*>(rows[r]) + b;
      std::memcpy(out + r * 2, &blk->d, 2);
      std::memcpy(out + kScaleBytes + r * 2, &blk->m, 2);
      qs = blk->qs;
      qh_bytes = blk->qh;
    }
    if (qh_bytes != nullptr) {
      uint32_t qh;
      std::memcpy(&qh, qh_bytes, 4);
      uint8_t* hi = regs + 128 + lane;
      for (int e = 0; e < 32; ++e) {
        if ((qh >> e & 1u) != 0) hi[e % 4] |= static_cast<uint8_t>(1u << (e / 4));
      }
    }
    for (int m = 0; m < 4; ++m) std::memcpy(regs + m * 32 + lane, qs + 4 * m, 4);
  }
}

// What a tile needs of one token's activation block besides its quants.
struct TokenBlock {
  float d = 0;
  int32_t offset_sum = 0;  // quant_offset * sum of the block's quants (Q8_0: 128 * sum, VNNI)
  float s = 0;             // Q5_1: the Q8_1 block's s (f16 of d * sum), met by the mins
};

// A Q8_K super-block's scale and its eight 32-element sums.
struct KTokenBlock {
  float d = 0;
  int16_t sums[8] = {};
};

struct Acts {
  const uint8_t* q = nullptr;  // [n_tokens][nb] BlockQ8_0 (BlockQ8_K for K-quants)
  const TokenBlock* tb = nullptr;
  const KTokenBlock* ktb = nullptr;
  const uint8_t* abs = nullptr;  // [n_tokens][nb][32] |quants| (Q8_0 weights)
  int64_t nb = 0;
};

struct Problem {
  const PackedWeight* w = nullptr;
  Acts x;
  float* y = nullptr;
};

using RangeFn = void (*)(const Problem&, int64_t, int64_t, int64_t, int64_t);

}  // namespace

bool packable(TensorType type) {
  return group_block_bytes(type) != 0 && isa_supported(Isa::kAvx2);
}

}  // namespace minfer::cpu

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "backend/cpu/matmul_gemm_vnni.h"
#include "backend/cpu/vnni_target.h"

#define MINFER_PK __attribute__((target("avx2,fma,f16c")))
#define MINFER_PK_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#define MINFER_PK_VNNI 0
namespace minfer::cpu {
namespace {
namespace avx2 {
#include "backend/cpu/matmul_packed_kernels.inc"
}  // namespace avx2
}  // namespace
}  // namespace minfer::cpu
#undef MINFER_PK
#undef MINFER_PK_INLINE
#undef MINFER_PK_VNNI

#define MINFER_PK MINFER_VNNI
#define MINFER_PK_INLINE MINFER_VNNI_INLINE
#define MINFER_PK_VNNI 1
namespace minfer::cpu {
namespace {
namespace vnni {
#include "backend/cpu/matmul_packed_kernels.inc"
}  // namespace vnni
}  // namespace
}  // namespace minfer::cpu
#undef MINFER_PK
#undef MINFER_PK_INLINE
#undef MINFER_PK_VNNI

namespace minfer::cpu {
namespace {

template <TensorType T>
RangeFn pick(bool use_vnni) {
  return use_vnni ? vnni::run_range<T> : avx2::run_range<T>;
}

RangeFn range_fn(TensorType t, bool use_vnni) {
  switch (t) {
    case TensorType::Q4_0:
      return pick<TensorType::Q4_0>(use_vnni);
    case TensorType::Q5_0:
      return pick<TensorType::Q5_0>(use_vnni);
    case TensorType::Q5_1:
      return pick<TensorType::Q5_1>(use_vnni);
    case TensorType::Q8_0:
      return pick<TensorType::Q8_0>(use_vnni);
    case TensorType::Q4_K:
      return pick<TensorType::Q4_K>(use_vnni);
    case TensorType::Q5_K:
      return pick<TensorType::Q5_K>(use_vnni);
    case TensorType::Q6_K:
      return pick<TensorType::Q6_K>(use_vnni);
    default:
      return nullptr;
  }
}

}  // namespace

bool packed_vnni_available() {
  return vnni_gemm_available();
}

}  // namespace minfer::cpu

#else  // not x86: packable() is false, so nothing reaches the kernels

namespace minfer::cpu {
namespace {
RangeFn range_fn(TensorType, bool) {
  return nullptr;
}
}  // namespace

bool packed_vnni_available() {
  return false;
}

}  // namespace minfer::cpu

#endif

namespace minfer::cpu {
namespace {

std::string dims(const PackedWeight& p, int64_t n_tokens) {
  return std::string(quant::type_name(p.type)) + " [" + std::to_string(p.rows) + " x " +
         std::to_string(p.row_len) + "], " + std::to_string(n_tokens) + " tokens";
}

// Records the first token whose activations could not be quantized.
void note_bad(std::atomic<int64_t>& first_bad, int64_t t) {
  int64_t cur = first_bad.load();
  while (t < cur && !first_bad.compare_exchange_weak(cur, t)) {
  }
}

// Q8_0 activations with each block's scale and offset sum, and |quants|
// for the AVX2 kernels of Q8_0 weights.
void prepare_q8_0_row(const PackedWeight& p, bool vnni, const BlockQ8_0* q, TokenBlock* tb,
                      uint8_t* abs, int64_t nb) {
  const int32_t offset = sum_offset(p.type, vnni);
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int8_t v : q[b].qs) sum += v;
    tb[b] = {quant::f16_to_f32(q[b].d), offset * sum};
    if (abs != nullptr) {
      for (int e = 0; e < 32; ++e) abs[b * 32 + e] = static_cast<uint8_t>(std::abs(q[b].qs[e]));
    }
  }
}

// Q8_1 activations (Q5_1 weights) with each block's scale and s.
void prepare_q8_1_row(const BlockQ8_1* q, TokenBlock* tb, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b)
    tb[b] = {quant::f16_to_f32(q[b].d), 0, quant::f16_to_f32(q[b].s)};
}

// Q8_K activations with each super-block's scale and 32-element sums.
void prepare_q8_k_row(const BlockQ8_K* q, KTokenBlock* tb, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    tb[b].d = q[b].d;
    for (int s = 0; s < 8; ++s) {
      tb[b].sums[s] = static_cast<int16_t>(q[b].bsums[2 * s] + q[b].bsums[2 * s + 1]);
    }
  }
}

// Quantizes the activations (as matmul() does: Q8_0, or Q8_K for K-quants)
// into scratch, with what the tiles need of each block.
Status prepare_acts(const PackedWeight& p, bool vnni, const float* x, int64_t n_tokens,
                    ThreadPool& pool, std::vector<uint8_t>& scratch, Acts& acts) {
  const bool kq = k_quant(p.type);
  const bool q81 = q8_1_acts(p.type);
  const TensorType xt = kq ? TensorType::Q8_K : q81 ? TensorType::Q8_1 : TensorType::Q8_0;
  const int64_t nb = p.row_len / block_elems(p.type);
  const size_t xblock = kq ? sizeof(BlockQ8_K) : q81 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  const size_t q_bytes = static_cast<size_t>(n_tokens * nb) * xblock;
  // Q6_K's tiles read d and the 16-element sums from the Q8_K blocks themselves.
  const bool want_ktb = has_mins(p.type);
  const size_t tb_bytes = static_cast<size_t>(n_tokens * nb) * (want_ktb ? sizeof(KTokenBlock)
                                                                : kq     ? 0
                                                                         : sizeof(TokenBlock));
  const bool want_abs = p.type == TensorType::Q8_0 && !vnni;
  const size_t abs_bytes = want_abs ? static_cast<size_t>(n_tokens * nb) * 32 : 0;
  const size_t tb_at = (q_bytes + 63) / 64 * 64;
  scratch.resize(tb_at + tb_bytes + abs_bytes);
  uint8_t* q = scratch.data();
  uint8_t* tb = scratch.data() + tb_at;
  uint8_t* abs = want_abs ? tb + tb_bytes : nullptr;
  std::atomic<int64_t> first_bad{n_tokens};
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      uint8_t* qt = q + static_cast<size_t>(t * nb) * xblock;
      if (!quantize_activations(xt, x + t * p.row_len, qt, p.row_len).is_ok()) {
        note_bad(first_bad, t);
      } else if (want_ktb) {
        prepare_q8_k_row(reinterpret_cast<const BlockQ8_K*>(qt),
                         reinterpret_cast<KTokenBlock*>(tb) + t * nb, nb);
      } else if (q81) {
        prepare_q8_1_row(reinterpret_cast<const BlockQ8_1*>(qt),
                         reinterpret_cast<TokenBlock*>(tb) + t * nb, nb);
      } else if (!kq) {
        prepare_q8_0_row(p, vnni, reinterpret_cast<const BlockQ8_0*>(qt),
                         reinterpret_cast<TokenBlock*>(tb) + t * nb,
                         abs != nullptr ? abs + t * nb * 32 : nullptr, nb);
      }
    }
  });
  const int64_t bad = first_bad.load();
  if (bad < n_tokens) {
    std::vector<uint8_t> row(static_cast<size_t>(nb) * xblock);
    return quant::quantize_row(xt, x + bad * p.row_len, row.data(), p.row_len)
        .with_context("matmul " + dims(p, n_tokens) + ": activation row " + std::to_string(bad));
  }
  acts.q = q;
  acts.tb = kq ? nullptr : reinterpret_cast<const TokenBlock*>(tb);
  acts.ktb = want_ktb ? reinterpret_cast<const KTokenBlock*>(tb) : nullptr;
  acts.abs = abs;
  acts.nb = nb;
  return Status::ok();
}

}  // namespace

Result<PackedWeight> pack_weight(const MatmulWeight& w, ThreadPool& pool) {
  if (!packable(w.type)) {
    return Status::invalid_argument(std::string("no packed matmul for ") +
                                    std::string(quant::type_name(w.type)) + " on this CPU");
  }
  if (w.rows <= 0 || w.row_len <= 0 || w.row_len % block_elems(w.type) != 0 || w.data == nullptr) {
    return Status::invalid_argument("cannot pack " + std::string(quant::type_name(w.type)) + " [" +
                                    std::to_string(w.rows) + " x " + std::to_string(w.row_len) +
                                    "]");
  }
  MINFER_ASSIGN_OR_RETURN(const size_t row_bytes, quant::row_bytes(w.type, w.row_len));
  const size_t stride = w.row_stride != 0 ? w.row_stride : row_bytes;
  if (stride < row_bytes) return Status::invalid_argument("row stride shorter than a row");
  PackedWeight p;
  p.type = w.type;
  p.rows = w.rows;
  p.row_len = w.row_len;
  const int64_t nb = w.row_len / block_elems(w.type);
  const size_t gb = group_block_bytes(w.type);
  p.group_bytes = gb * static_cast<size_t>(nb);
  const int64_t groups = (w.rows + kGroup - 1) / kGroup;
  p.data.resize(p.group_bytes * static_cast<size_t>(groups));
  const auto* src = static_cast<const uint8_t*>(w.data);
  pool.parallel_for(groups, [&](int64_t begin, int64_t end, int) {
    for (int64_t g = begin; g < end; ++g) {
      const uint8_t* rows[kGroup];
      const int64_t n_rows = std::min(kGroup, w.rows - g * kGroup);
      for (int64_t r = 0; r < n_rows; ++r)
        rows[r] = src + static_cast<size_t>(g * kGroup + r) * stride;
      uint8_t* out = p.data.data() + static_cast<size_t>(g) * p.group_bytes;
      for (int64_t b = 0; b < nb; ++b) pack_group_block(w.type, rows, n_rows, b, out + b * gb);
    }
  });
  return p;
}

Status packed_matmul(const PackedWeight& p, const float* x, int64_t n_tokens, float* y,
                     ThreadPool& pool, std::vector<uint8_t>& scratch, PackedKernels kernels) {
  const bool vnni = kernels == PackedKernels::kAuto && packed_vnni_available();
  const RangeFn run = range_fn(p.type, vnni);
  if (run == nullptr || !packable(p.type)) {
    return Status::internal("packed matmul " + dims(p, n_tokens) + ": not available on this CPU");
  }
  if (n_tokens < 0) return Status::internal("packed matmul: negative token count");
  if (n_tokens == 0) return Status::ok();
  if (x == nullptr || y == nullptr) return Status::internal("packed matmul: null buffer");
  Problem prob;
  prob.w = &p;
  prob.y = y;
  MINFER_RETURN_IF_ERROR(prepare_acts(p, vnni, x, n_tokens, pool, scratch, prob.x));
  const int64_t groups = (p.rows + kGroup - 1) / kGroup;
  const int64_t g_blocks = (groups + kGroupsPerTask - 1) / kGroupsPerTask;
  const int64_t t_blocks = (n_tokens + kTokensPerTask - 1) / kTokensPerTask;
  pool.parallel_for(g_blocks * t_blocks, [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g0 = (task / t_blocks) * kGroupsPerTask;
      const int64_t t0 = (task % t_blocks) * kTokensPerTask;
      run(prob, g0, std::min(groups, g0 + kGroupsPerTask), t0,
          std::min(n_tokens, t0 + kTokensPerTask));
    }
  });
  return Status::ok();
}

}  // namespace minfer::cpu
