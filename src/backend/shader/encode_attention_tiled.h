// The tiled (flash-style) attention of prompts (kernels/attention_tiled.comp):
// encode_attention's semantics for batches of many queries, with each K/V
// row read once per block of query rows (the q heads of one kv head, over
// consecutive tokens) instead of once per (query, head).
//
// Contract: encode_attention's (encode_attention.h): the same arguments,
// shapes refused with the same codes (invalid_argument naming the op, the
// value and the limit; unimplemented for a cache type without a kernel),
// the same bindings and sizes, the same error words for a bad position,
// slot or page (the query left as it was, the page's keys left out), and
// nothing runs until the recorder's submit_and_wait(); one difference: a
// block walks the union of its rows' key ranges, so a bad page in a gap
// between them (a sequence's queries at non-consecutive positions) is
// reported though no query reads it. Threading: as the Recorder.
//
// Numerics: scores are (scale * q) . k in f32 over keys dequantized to f32
// (as attention.comp's), an online softmax per query row and f32 V sums.
// The order of additions is fixed by the shape, but a block's key tiles
// start at the smallest key its rows see, so a query's output depends on
// the other queries of its block: results are not batch-invariant and
// differ from encode_attention's in the last bits (use it only where a node
// need not be batch-invariant).
//
// lavapipe (docs/VULKAN.md rule 7): a CPU device refuses (unimplemented)
// shapes whose attention_tiled_loop_bound passes 60000 iterations, as
// encode_attention does with its own bound; attention_tiled_applies() says
// false for them.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/encode_attention.h"
#include "backend/shader/recorder.h"
#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::shader {

// The smallest batch for which ShaderBackend uses the tiled kernel: below it
// the per-query kernel's many workgroups fill the GPU as well
// (docs/PERFORMANCE.md, "Constants and their measurements";
// tests/backend/vulkan_attention_tiled_test.cpp, DISABLED_PromptTiming).
inline constexpr int64_t kAttentionTiledMinTokens = 32;

// The tiled kernel for a cache of (k_type, v_type) on `device`, or
// unimplemented naming the types (only F32, F16, Q8_0) or why the device
// has no pipeline for it.
Result<uint32_t> attention_tiled_kernel(const Device& device, quant::TensorType k_type,
                                        quant::TensorType v_type);

// Whether encode_attention_tiled takes `shape` on `device` and is the
// better kernel for it: n_tokens >= kAttentionTiledMinTokens, a valid shape
// (head_dim even and <= 256), a pipeline for the cache types that fits the
// device's shared memory, and on a CPU device a loop bound within lavapipe's
// cap. False: use encode_attention, which takes every shape this takes.
bool attention_tiled_applies(const Device& device, const AttentionShape& shape);

// The most loop iterations one invocation of attention_tiled.comp runs for
// `shape` with `rows_per_invocation` (1, 2 or 4) output rows per invocation:
// every block walking every position of the cache (the positions are the
// device's), a paged block one pass per slot of its rows.
uint64_t attention_tiled_loop_bound(const AttentionShape& shape, uint32_t rows_per_invocation);

// encode_attention's operation (encode_attention.h): out[t][h] = softmax over
// the keys query t sees of scale * q[t][h] . K[j][h / g] (and the sink of
// head h, if given), times V[j][h / g]; the same arguments, bindings, checks
// and error words.
Status encode_attention_tiled(Recorder& rec, const BufferRange& q, const BufferRange& positions,
                              const BufferRange& seq_slots, const BufferRange& page_table,
                              const BufferRange& k_cache, const BufferRange& v_cache,
                              const BufferRange& sinks, const BufferRange& out,
                              const BufferRange& err, const AttentionShape& shape,
                              std::string_view note = {});

// Tests only: the output rows each invocation of the V sums holds in every
// later encode_attention_tiled (1, 2 or 4; 0 restores the encoder's choice:
// 4, or 1 where 4 would leave the grid with few workgroups). Not for use
// while other threads encode.
void force_attention_tiled_rows_for_testing(uint32_t rows_per_invocation);

}  // namespace minfer::shader
