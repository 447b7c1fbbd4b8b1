// Device error words: the codes every GPU backend's kernels report, and their
// words for the host. One list for the CUDA kernels (.cu) and the shared
// GLSL kernels (Vulkan, and Metal through their MSL translation), so a code
// means the same thing on every device.
//
// Contract:
//   - A kernel that indexes memory by a value computed on the device or
//     written by the host (token ids, cache rows, positions, page tables,
//     expert ids) checks the index; when it is outside its table the kernel
//     skips the access and reports it in MINFER_ERR_WORDS 32-bit words:
//     word 0 the code (first error wins: 0 -> code by one atomic
//     compare-and-swap), word 1 the offending value (as an i32), word 2 its
//     bound. The backend reads the words after each wait, turns them into a
//     Status with device_error() and zeroes them.
//   - The codes are stored in compiled kernels (SPIR-V, MSL, whose digests
//     are pinned in tests/backend/msl_digests.sha256): never renumber one;
//     add new codes at the end.
//   - Plain C preprocessor above the __cplusplus block: included by C++, by
//     CUDA and by GLSL (glslc's #include, through shader/kernel_args.h).
// Threading: device_error() is a pure function.
#ifndef MINFER_BACKEND_DEVICE_ERRORS_H_
#define MINFER_BACKEND_DEVICE_ERRORS_H_

#define MINFER_ERR_WORDS 4
#define MINFER_ERR_NONE 0u
#define MINFER_ERR_ROW_ID 1u        // get_rows, gather_rows: an id outside the rows of its table
#define MINFER_ERR_CACHE_ROW 2u     // kv_store, rope_store: a position outside the cache
#define MINFER_ERR_POSITION 3u      // attention: a position, slot or page outside the cache/tables
#define MINFER_ERR_ROUTER_NAN 4u    // moe_topk: a NaN router logit (value: the token)
#define MINFER_ERR_EXPERT_ID 5u     // moe_weights, matmul_id: an expert id outside the experts
#define MINFER_ERR_NONFINITE_KV 6u  // kv_store into q8_0: inf/NaN (value: the position; no bound)

#ifdef __cplusplus
#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace minfer::backend {

// The error that `words` (MINFER_ERR_WORDS words read back from the device,
// words[0] != MINFER_ERR_NONE) report, as a Status whose code says its kind
// (a bad id or value from the caller: kInvalidArgument; a position past the
// cache: kOutOfRange; an unknown code: kInternal) and whose message is
// "<backend>: a kernel reported <the error, with its value and bound>; <trail>",
// e.g. "CUDA: a kernel reported expert id 9 outside [0, 4); last 2 kernels ...".
[[nodiscard]] Status device_error(const uint32_t words[MINFER_ERR_WORDS], std::string_view backend,
                                  std::string_view trail);

}  // namespace minfer::backend
#endif  // __cplusplus

#endif  // MINFER_BACKEND_DEVICE_ERRORS_H_
