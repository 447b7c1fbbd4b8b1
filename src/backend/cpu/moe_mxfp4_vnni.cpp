// AVX-512 VNNI MXFP4 expert tiles behind backend/cpu/moe_mxfp4_vnni.h. Every
// function that uses AVX-512 carries the target attribute, so the file builds
// for the baseline ISA and nothing here runs unless vnni_gemm_available().
#include "backend/cpu/moe_mxfp4_vnni.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstring>

#include "backend/cpu/moe_prefetch.h"
#include "backend/cpu/vnni_target.h"
#include "quant/blocks.h"

namespace minfer::cpu {
namespace {

constexpr size_t kWBlock = sizeof(quant::BlockMxfp4);  // 17
constexpr size_t kXBlock = sizeof(quant::BlockQ8_0);   // 34
constexpr int kRows = 4;                               // weight rows per pass
constexpr int kTokens = 3;                             // tokens per pass
// The doubled E2M1 values plus kOffset, all in [0, 24]: vpdpbusd's unsigned side.
constexpr int kOffset = 12;

// quant::mxfp4_half_scale of every E8M0 byte, so a row's block scale is one load.
constexpr std::array<float, 256> kHalfScales = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[e] = quant::mxfp4_half_scale(static_cast<uint8_t>(e));
  return t;
}();

alignas(16) constexpr std::array<int8_t, 16> kOffsetValues = [] {
  std::array<int8_t, 16> t{};
  for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(quant::kMxfp4Values[i] + kOffset);
  return t;
}();

// vec_dot_avx2.cpp's hsum_ps, the same adds in the same order.
MINFER_VNNI_INLINE float hsum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// One token's block: its 32 quants, f16(d) as f32 in every lane, and
// -kOffset times each lane's sum of four quants (vpdpbusd's starting value).
struct XBlock {
  __m256i q;
  __m256 d;
  __m256i start;
};

MINFER_VNNI_INLINE XBlock load_x(const uint8_t* px) {
  XBlock b;
  b.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px + 2));
  uint16_t h;
  std::memcpy(&h, px, 2);
  b.d = _mm256_set1_ps(_cvtsh_ss(h));
  const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(kOffset), b.q);
  b.start = _mm256_sub_epi32(_mm256_setzero_si256(), sums);
  return b;
}

// One row's block: 32 offset values in element order (low nibbles are
// elements 0..15, high nibbles 16..31) and half its E8M0 scale in every lane.
MINFER_VNNI_INLINE void load_w(const uint8_t* pw, __m256i table, __m256i& q, __m256& scale) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pw + 1));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  q = _mm256_shuffle_epi8(table, _mm256_and_si256(both, _mm256_set1_epi8(0x0f)));
  scale = _mm256_broadcast_ss(&kHalfScales[pw[0]]);
}

// R rows from r0 times tokens [t0, t0 + T): each block's activations are
// loaded once for the R rows and each row's nibbles unpacked once for the T
// tokens; every (row, token) keeps its own accumulator in block order.
template <int R, int T>
MINFER_VNNI void pass(const Mxfp4ExpertTile& p, int64_t r0, int64_t t0, ExpertPrefetch& pf) {
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_load_si128(reinterpret_cast<const __m128i*>(kOffsetValues.data())));
  const uint8_t* w0 = p.w + static_cast<size_t>(r0) * p.w_stride;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int64_t n_blocks = p.row_len / 32;
  const auto base = reinterpret_cast<uintptr_t>(w0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (t0 == 0) pf.upto(base + static_cast<size_t>(b + 1) * R * kWBlock);
    XBlock x[T];
    for (int t = 0; t < T; ++t) x[t] = load_x(p.x[t0 + t] + b * kXBlock);
    for (int r = 0; r < R; ++r) {
      __m256i q;
      __m256 scale;
      load_w(w0 + r * p.w_stride + b * kWBlock, table, q, scale);
      for (int t = 0; t < T; ++t) {
        const __m256 s = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(x[t].start, q, x[t].q));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(x[t].d, scale), s, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) p.out[t0 + t][r0 + r] = hsum(acc[r][t]);
  }
}

template <int R>
void rows_times_tokens(const Mxfp4ExpertTile& p, int64_t r0, ExpertPrefetch& pf) {
  int64_t t = 0;
  for (; t + kTokens <= p.n_tokens; t += kTokens) pass<R, kTokens>(p, r0, t, pf);
  if (p.n_tokens - t == 2) pass<R, 2>(p, r0, t, pf);
  if (p.n_tokens - t == 1) pass<R, 1>(p, r0, t, pf);
}

}  // namespace

void mxfp4_expert_tile(const Mxfp4ExpertTile& p, int64_t r_begin, int64_t r_end) {
  ExpertPrefetch pf = ExpertPrefetch::start(p.w + static_cast<size_t>(r_begin) * p.w_stride,
                                            p.w + static_cast<size_t>(p.rows) * p.w_stride);
  int64_t r = r_begin;
  for (; r + kRows <= r_end; r += kRows) rows_times_tokens<kRows>(p, r, pf);
  for (; r < r_end; ++r) rows_times_tokens<1>(p, r, pf);
}

}  // namespace minfer::cpu

#else  // !defined(__x86_64__)

namespace minfer::cpu {

void mxfp4_expert_tile(const Mxfp4ExpertTile&, int64_t, int64_t) {}

}  // namespace minfer::cpu

#endif
