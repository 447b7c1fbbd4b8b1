// Launchers of the CUDA backend's kernels. Each enqueues work on `stream` and
// returns the launch status (cudaGetLastError after the launch); none waits.
//
// Shapes: activations are dense row-major f32 [rows][row_len], as in the graph
// IR. Data-dependent errors found on the device (a token id or a position out
// of range) are reported through `err`, a device array of kErrWords ints that
// the backend reads after each synchronize (first error wins):
//   err[0] = ErrCode, err[1..3] = the offending values.
// The shape checks that need no device data happen in the backend before a
// launch (op_runners.cu); these functions trust their arguments.
// Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/device_errors.h"
#include "quant/tensor_type.h"

namespace minfer::cuda {

// The codes are backend/device_errors.h's, shared with the shader kernels.
constexpr int kErrWords = MINFER_ERR_WORDS;
enum ErrCode : int {
  kErrNone = MINFER_ERR_NONE,
  kErrTokenRange = MINFER_ERR_ROW_ID,          // err[1] = id, err[2] = rows of the table
  kErrPositionRange = MINFER_ERR_CACHE_ROW,    // err[1] = position, err[2] = cache rows
  kErrNonFiniteKv = MINFER_ERR_NONFINITE_KV,   // err[1] = position of a q8_0 row given inf/NaN
  kErrExpertRange = MINFER_ERR_EXPERT_ID,      // err[1] = expert id, err[2] = experts
  kErrNanRouterLogit = MINFER_ERR_ROUTER_NAN,  // err[1] = token, err[2] = experts
};

// --- matmul.cu -------------------------------------------------------------
// y[t][r] = sum_k W[r][k] x[t][k] (+ bias[r]); W rows of `row_bytes` bytes in
// `type`; in_dim a multiple of 32. y must not overlap x.
cudaError_t launch_matmul(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                          int64_t in_dim, const float* x, int64_t n_tokens, const float* bias,
                          float* y, cudaStream_t stream);
// out[r][:] = dequant(W[ids[r]]) * scale, row_len a multiple of 32.
cudaError_t launch_get_rows_weight(quant::TensorType type, const void* w, size_t row_bytes,
                                   int64_t n_table_rows, int64_t row_len, const int32_t* ids,
                                   int64_t n_rows, float scale, float* out, int* err,
                                   cudaStream_t stream);
// Types with a device decoder.
bool has_decoder(quant::TensorType type);

// --- matmul_mma.cu ---------------------------------------------------------
// launch_matmul's path for n_tokens >= kMmaMinTokens: bf16 tensor-core GEMM
// with f32 accumulation (weights decoded to bf16, activations rounded to bf16;
// relative error ~2^-9 of each dot product's norm). Same contract as
// launch_matmul otherwise. Returns cudaErrorMemoryAllocation, with no error
// left pending, when its stream-ordered scratch (bf16 copies of the weights
// and activations) cannot be allocated, or the device refuses the GEMM's
// 80 KiB of shared memory: the caller then runs its f32 kernel.
constexpr int64_t kMmaMinTokens = 128;
// Stream-ordered scratch from a per-device pool that keeps up to 1 GiB between
// calls: *p is usable by work enqueued on `stream` after this call until
// cudaFreeAsync(*p, stream). Returns cudaErrorMemoryAllocation, with no error
// left pending, when none can be had.
cudaError_t scratch_alloc(void** p, size_t bytes, cudaStream_t stream);
cudaError_t launch_matmul_mma(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                              int64_t in_dim, const float* x, int64_t n_tokens, const float* bias,
                              float* y, cudaStream_t stream);

// --- ops.cu ------------------------------------------------------------------
enum class Ew : int { kAdd, kMul, kScale, kSilu, kGelu, kSwiGLU, kGeGLU };
// y = op(a[, b]); n elements; y may alias a or b.
cudaError_t launch_elementwise(Ew op, const float* a, const float* b, float s, int64_t n, float* y,
                               cudaStream_t stream);
// gpt-oss's clamped GLU (graph::GluMeta), n elements: x = min(gate, limit),
// u = clamp(up, -limit, limit), y = x / (1 + expf(alpha * -x)) * (u + 1), in
// the CPU kernel's order; a NaN input gives NaN. y may alias gate or up.
cudaError_t launch_swiglu_oai(const float* gate, const float* up, int64_t n, float alpha,
                              float limit, float* y, cudaStream_t stream);
// Each row's first largest element (NaN never; -1 when all are -inf or NaN),
// rows split over blocks whose partial results go to scratch
// (argmax_scratch_bytes).
size_t argmax_scratch_bytes(int64_t n_rows, int64_t width);
cudaError_t launch_argmax(const float* x, int64_t n_rows, int64_t width, void* scratch,
                          int32_t* out, cudaStream_t stream);
// Rows of `dim` normalized by their rms, times weight (nullable); y may alias x.
cudaError_t launch_rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim,
                            float eps, float* y, cudaStream_t stream);
// YaRN's per-pair blend and magnitude scale: graph::RopeMeta's fields as
// graph/yarn.h computes them. ext_factor 0 is plain RoPE (the others are
// then ignored and the angles are bit for bit those without YaRN).
struct YarnArgs {
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
  float mscale = 1.0f;
};
// RoPE over [n_tokens][n_heads * head_dim]; y may alias x. neox selects the
// mode; angles as device_math.cuh's rope_cos_sin states them.
cudaError_t launch_rope(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                        int64_t n_rot, const int32_t* positions, float freq_base, float freq_scale,
                        const float* freq_factors, const YarnArgs& yarn, bool neox, float* y,
                        cudaStream_t stream);
// Writes k and v rows ([n_tokens][row]) at their positions into the caches,
// each n_ctx rows of `row` elements of k_type / v_type (F32, F16 or Q8_0;
// Q8_0 needs row % 32 == 0; layouts and rounding in kv_cache.cuh).
// Returns cudaErrorInvalidValue for another type.
cudaError_t launch_kv_store(const float* k, const float* v, const int32_t* positions,
                            int64_t n_tokens, int64_t row, int64_t n_ctx, quant::TensorType k_type,
                            quant::TensorType v_type, void* k_cache, void* v_cache, int* err,
                            cudaStream_t stream);
// out[r] = x[rows[r]] for n_rows rows of `width` floats; out must not overlap x.
cudaError_t launch_gather_rows(const float* x, const int32_t* rows, int64_t n_rows, int64_t width,
                               float* out, cudaStream_t stream);

// --- attention.cu ------------------------------------------------------------
struct AttentionArgs {
  const float* q = nullptr;       // [n_tokens][n_head * head_dim]
  const void* k_cache = nullptr;  // [n_ctx][n_head_kv * head_dim] of k_type
  const void* v_cache = nullptr;  // the same of v_type
  // F32, F16 or Q8_0 each (Q8_0: head_dim % 32 == 0); see kv_cache.cuh.
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  const int32_t* positions = nullptr;  // [n_tokens]
  const float* batch_k = nullptr;      // [n_tokens] rows of n_head_kv * head_dim, or null
  const float* batch_v = nullptr;
  // Floats from one token's batch_k (batch_v) row to the next; 0:
  // n_head_kv * head_dim. A one-sequence paged batch's k and v are the
  // packed q|k|v rows' (stride n_head * head_dim + 2 n_head_kv * head_dim).
  int64_t batch_stride = 0;
  int64_t q_stride = 0;  // floats from one token's q to the next; 0: n_head * head_dim
  int64_t n_tokens = 0, n_ctx = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t sliding_window = 0;
  // [n_head] f32 sink logits (AttentionMeta::sinks), or null: each head's
  // joins its rows' softmax denominators as a key without a value, folded
  // into the merged (max, sum, output) state once per row after the keys
  // (never per split of the key range).
  const float* sinks = nullptr;
  float* out = nullptr;  // [n_tokens][n_head * head_dim], not aliasing q
  int* err = nullptr;
  bool split_kv = true;  // decode may use the split-KV cluster kernel (CudaOptions::no_split_kv)
  // Each token's result independent of the batch (AttentionMeta): the
  // per-token kernel with a fixed block shape, never split.
  bool batch_invariant = false;
  // A paged pool of many sequences (AttentionMeta::page_size > 0): token t
  // reads position j of its sequence from cache row
  // page_table[seq_slots[t] * max_pages + j / page_size] * page_size + j % page_size.
  // Paged batches take the per-token kernels at every size (a flash tile
  // shares K/V rows across query rows, which may belong to other sequences),
  // unless one_sequence (AttentionMeta): the tiled kernel then reads every
  // row's keys through token 0's page-table row.
  const int32_t* seq_slots = nullptr;   // [n_tokens]
  const int32_t* page_table = nullptr;  // [n_slots][max_pages]
  int64_t page_size = 0, max_pages = 0;
  bool one_sequence = false;
};
// Head dims the attention kernel is built for.
bool attention_head_dim_ok(int64_t head_dim);
cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream);

// --- gemv_q8.cu (GEMVs on int8-quantized activations) ----------------------
// The tokens' activations and how to prepare them: x ([n_tokens][in_dim]
// floats, 16-byte aligned, in_dim a multiple of 32), each row RMS-normalized
// first when rms_norm (x / sqrt(mean(x^2) + eps), times norm_weight when not
// null), then quantized per 32 elements to int8 in each block's shared
// memory. A token's outputs do not depend on n_tokens or on the other rows
// (bit for bit): these kernels are batch-invariant.
struct Q8Input {
  const float* x = nullptr;
  int64_t in_dim = 0;
  int64_t n_tokens = 1;
  // Not null: the activations already quantized by launch_quantize_q8 (the
  // norm applied), [n_tokens][q8_activation_bytes(in_dim)]; x is not read.
  const int8_t* quantized = nullptr;
  // The node must be batch-invariant: one token takes the kernels whose sums
  // round exactly as the multi-token ones (no contraction into FMAs).
  bool batch_invariant = false;
  bool rms_norm = false;
  const float* norm_weight = nullptr;
  float eps = 1e-6f;
  // launch_quantize_q8 only, without rms_norm: x is a FusedFFN's gate rows,
  // glu_up its up rows; the activation quantized is act(gate) * up (silu, or
  // gelu when glu_gelu: the elementwise GLU's numbers), also written to
  // glu_out ([n_tokens][in_dim], overlapping neither).
  const float* glu_up = nullptr;
  float* glu_out = nullptr;
  bool glu_gelu = false;
  // The 32-value units of each 256 values share one scale (amax over the
  // 256; in_dim a multiple of 256): the layout stays (d per unit, the same
  // d eight times). The K-quant tensor-core products require it, since
  // their integer sums then span a super-block (mmq_formats.cuh); every
  // other kernel reads either form.
  bool scale_per_256 = false;
};
// Whether the int8 GEMVs take `type` with rows of in_dim elements (Q4_0,
// Q8_0, Q4_K, Q5_K, Q6_K; K-quants need in_dim a multiple of 256).
bool has_q8_gemv(quant::TensorType type, int64_t in_dim);
// --- mmq.cu (int8 tensor-core products on quantized activations) ------------
// Whether launch_mmq takes `type` with rows of in_dim (Q4_0, Q8_0: in_dim a
// multiple of 32; Q4_K, Q5_K, Q6_K: of 256).
bool has_mmq(quant::TensorType type, int64_t in_dim);
// y[t][r] = (W[r] . x[t] + bias[r]) + residual[t][r] (bias, residual
// nullable; y may alias residual) for in.n_tokens activations of in.in_dim
// quantized by launch_quantize_q8 (in.quantized; for Q4_K, Q5_K and Q6_K
// with in.scale_per_256, cudaErrorInvalidValue without); each token's result
// independent of the batch, bit for bit, for any n_tokens >= 1. Without
// in.quantized, one token is quantized by the kernel itself from in.x (and
// its norm: the same bytes); cudaErrorNotSupported where that kernel cannot
// take it (several tokens, unaligned weights): quantize, then call again.
// Q4_K and Q5_K weights and rows 16-byte aligned (cudaErrorInvalidValue
// otherwise), the others 2-byte.
cudaError_t launch_mmq(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                       const Q8Input& in, const float* bias, const float* residual, float* y,
                       cudaStream_t stream);
// Up to three products of one type on the same quantized activations in
// one launch: y[i] = W[i] x (+ bias[i]), each bit for bit what launch_mmq
// gives alone (a layer's q, k and v).
struct MmqStack {
  static constexpr int kMax = 3;
  int n = 0;
  const void* w[kMax] = {};
  size_t row_bytes[kMax] = {};
  int64_t rows[kMax] = {};
  const float* bias[kMax] = {};
  float* y[kMax] = {};
};
cudaError_t launch_mmq_stack(quant::TensorType type, const MmqStack& stack, const Q8Input& in,
                             cudaStream_t stream);
// Whether launch_mmq can take `in` unquantized (in.quantized null) for
// weights of `type` at w: one token, of a shape the one-token kernel takes,
// which then quantizes it itself in every block.
bool mmq_takes_unquantized(quant::TensorType type, const void* w, const Q8Input& in);
// Whether that pays for launches over `weight_bytes` in all: the blocks'
// repeated quantizing outweighs the saved launch on large matrices.
bool mmq_quantizes_itself(size_t weight_bytes);

// Bytes of one token's quantized activation (16-byte multiple).
size_t q8_activation_bytes(int64_t in_dim);
// Normalizes (when in.rms_norm) and quantizes in.n_tokens rows of in.x into
// `out` once, exactly as each GEMV block would (bit for bit), so that a
// multi-token GEMV's blocks copy instead of each quantizing all its tokens.
cudaError_t launch_quantize_q8(const Q8Input& in, int8_t* out, cudaStream_t stream);
// Whether launch_quantize_q8 takes n_tokens activations of in_dim.
bool quantize_q8_takes(int64_t in_dim, int64_t n_tokens);
// y[t][r] = (W[r] . x[t] + bias[r]) + residual[t][r] (bias, residual
// nullable); y may alias residual, not x. Weight rows 16-byte aligned for Q4_K and Q5_K, 2-byte
// otherwise; Q6_K weights (one token) start 16-byte aligned and are readable to their end rounded
// up to 16 bytes (the weight arena's placement; q8_units.cuh).
cudaError_t launch_gemv_q8(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                           const Q8Input& in, const float* bias, const float* residual, float* y,
                           cudaStream_t stream);
// y[t][r] = act(gate[r] . x[t]) * (up[r] . x[t]), act = gelu or silu.
cudaError_t launch_ffn_q8(quant::TensorType type, const void* gate, const void* up,
                          size_t row_bytes, int64_t n_ff, const Q8Input& in, bool gelu, float* y,
                          cudaStream_t stream);
// Up to three weights whose outputs are stacked: y = [W0 x + b0 | W1 x + b1 |
// W2 x + b2] (rows[i] = 0 for an absent weight; biases nullable); one token.
// W0 and W1 are of qk_type, W2 of v_type: one type, or Q4_K or Q5_K with a
// Q6_K W2 (the layers of a Q4_K_M / Q5_K_M file whose attn_v is Q6_K);
// has_stacked_q8 says which pairs are taken.
struct Q8Stack {
  const uint8_t* w[3] = {};
  size_t row_bytes[3] = {};
  int64_t rows[3] = {};
  const float* bias[3] = {};
};
bool has_stacked_q8(quant::TensorType qk_type, quant::TensorType v_type, int64_t in_dim);
cudaError_t launch_stacked_q8(quant::TensorType qk_type, quant::TensorType v_type, const Q8Stack& s,
                              const Q8Input& in, float* y, cudaStream_t stream);

// --- fused.cu (decode fusions) ----------------------------------------------
// FusedQKV / FusedQkvNorm for one token: out = [q | k | v] = x W^T + bias for
// the three weights, then per head: RMSNorm (q/k, when q_norm/k_norm are set),
// RoPE (q/k), and k, v written into the caches at positions[0] (or cells[0]).
// launch_qkv_post runs the per-head part alone, for n_tokens rows whose
// projections another kernel wrote to `proj`.
struct FusedQkvArgs {
  quant::TensorType type[3] = {};
  const void* w[3] = {};
  size_t row_bytes[3] = {};
  int64_t rows[3] = {};       // n_head*head_dim, n_head_kv*head_dim (twice)
  const float* bias[3] = {};  // each nullable
  int64_t in_dim = 0;         // a multiple of 32
  const float* x = nullptr;   // [in_dim]
  float* out = nullptr;       // [rows0 + rows1 + rows2], not overlapping x
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
  bool neox = true;
  float freq_base = 10000.0f, freq_scale = 1.0f;
  const float* freq_factors = nullptr;
  YarnArgs yarn;
  const float* q_norm = nullptr;  // [head_dim] or null
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [n_tokens]
  // [n_tokens] cache rows (a paged pool); null: the rows are the positions.
  const int32_t* cells = nullptr;
  int64_t n_tokens = 1;
  // launch_qkv_post: the projections, [n_tokens][q rows] then
  // [n_tokens][k rows] then [n_tokens][v rows], biases added; out gets the
  // packed rows [n_tokens][q | k | v]. Null: out holds them already (one
  // token, written by launch_fused_qkv's GEMV).
  const float* proj = nullptr;
  int64_t n_ctx = 0;
  // Cache row types, F32, F16 or Q8_0 each (Q8_0: head_dim % 32 == 0).
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int* err = nullptr;
  // The projections on the int8 GEMV (launch_stacked_q8, one type for all
  // three) with q8's input preparation (x and in_dim are taken from q8).
  bool q8_gemv = false;
  Q8Input q8;
};
// Head dims the fused post-processing kernel handles (even, <= 256).
bool fused_head_dim_ok(int64_t head_dim);
cudaError_t launch_fused_qkv(const FusedQkvArgs& a, cudaStream_t stream);
cudaError_t launch_qkv_post(const FusedQkvArgs& a, cudaStream_t stream);
// y[t][r] = act(x[t] . gate[r]) * (x[t] . up[r]), act = gelu or silu; gate and
// up of one type and row size; y must not overlap x.
cudaError_t launch_fused_ffn(quant::TensorType type, const void* gate, const void* up,
                             size_t row_bytes, int64_t n_ff, int64_t in_dim, const float* x,
                             int64_t n_tokens, bool gelu, float* y, cudaStream_t stream);

// (matmul.cu) The f32 GEMV: y[t][r] = (x[t] . W[r] + bias[r]) + residual[t][r]
// (the unfused order's value; bias and residual nullable), one block row per
// token, so a token's result does not depend on the batch (MatMulAdd, and
// batch-invariant matmuls of types the int8 GEMVs lack); y may alias
// residual, not x.
cudaError_t launch_gemv_add(quant::TensorType type, const void* w, size_t row_bytes, int64_t rows,
                            int64_t in_dim, const float* x, int64_t n_tokens, const float* bias,
                            const float* residual, float* y, cudaStream_t stream);

// --- moe.cu ----------------------------------------------------------------
// The mixture-of-experts ops (graph/ir.h: kMoeTopK, kMoeWeights, kMatMulId,
// kMoeSum). Router logits [n_tokens][n_expert], n_expert <= kMoeMaxExperts;
// ids and weights [n_tokens][n_used], n_used <= min(n_expert, kMoeMaxUsed);
// `gating` is graph::MoeGating's value. A NaN logit (kErrNanRouterLogit) or
// an id out of range (kErrExpertRange) is reported through err; the kernels
// then go on with valid ids, so nothing reads out of bounds.
constexpr int kMoeMaxExperts = 512;
constexpr int kMoeMaxUsed = 32;
cudaError_t launch_moe_topk(const float* logits, int64_t n_tokens, int n_expert, int n_used,
                            int gating, int32_t* ids, int* err, cudaStream_t stream);
cudaError_t launch_moe_weights(const float* logits, const int32_t* ids, int64_t n_tokens,
                               int n_expert, int n_used, int gating, float* weights, int* err,
                               cudaStream_t stream);
// The expert matmul: y[i][r] for output rows i = t*n_used+j is row (i if
// per_row_input, else t) of x times row r of expert ids[i]'s matrix, whose
// rows start at w + ids[i] * expert_bytes (+ bias[ids[i]][r] when bias is
// set). in_dim a multiple of 32.
struct MatMulIdArgs {
  quant::TensorType type;
  const void* w;
  size_t row_bytes, expert_bytes;
  int64_t rows, in_dim, n_expert;
  const float* x;
  bool per_row_input;
  const int32_t* ids;
  int64_t n_tokens;
  int n_used;
  const float* bias;
  float* y;
  int* err;
};
cudaError_t launch_matmul_id(const MatMulIdArgs& a, cudaStream_t stream);
// The same product on the int8 tensor cores (mmq_id.cu): the routed rows'
// activations quantized by launch_quantize_q8 (xq: [n_tokens] rows, or
// [n_tokens * n_used] when per_row_input; K-quants with scale_per_256),
// grouped by expert in one launch. Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4
// (has_mmq_id); each routed row's result independent of the batch, bit for
// bit. `work`: mmq_id_work_bytes of device memory (4-byte aligned).
struct MmqIdArgs {
  MatMulIdArgs m;  // m.x unused: xq instead
  const int8_t* xq;
  void* work;
};
bool has_mmq_id(quant::TensorType type, int64_t in_dim);
size_t mmq_id_work_bytes(int64_t n_rows, int n_expert);
cudaError_t launch_mmq_id(const MmqIdArgs& a, cudaStream_t stream);
// out[t][d] = y[t*n_used][d] * w[t][0] + y[t*n_used+1][d] * w[t][1] + ...,
// each product and sum rounded in order of j.
cudaError_t launch_moe_sum(const float* y, const float* weights, int64_t n_tokens, int n_used,
                           int64_t dim, float* out, cudaStream_t stream);

}  // namespace minfer::cuda
