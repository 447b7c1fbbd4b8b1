// Programmatic dependent launch (PDL) for the decode kernels.
//
// A kernel launched with launch_pdl may start while the kernel before it on
// the stream is still running, once every block of that kernel has called
// pdl_launch_dependents() (or exited). Contract of a kernel launched this way:
//   - before pdl_wait() it reads only what no earlier kernel of the step
//     writes (weights, norm weights) and writes nothing;
//   - pdl_wait() returns when the previous kernel has completed and its
//     writes are visible (and so, transitively, every earlier one);
//   - it may call pdl_launch_dependents() at any point, usually first, so that
//     the next PDL kernel can start its own pre-wait part.
// Both calls are no-ops in a kernel launched without the attribute and on
// devices below sm_90. MINFER_NO_PDL=1 makes every launch_pdl a plain launch.
// Only the int8 GEMVs use it by default (kPdlBetweenGemvs).
// Captured into CUDA graphs like any launch. Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_options.h"

namespace minfer::cuda {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether launches use PDL (process-wide, read once: MINFER_NO_PDL).
inline bool pdl_enabled() {
  static const bool on = !process_section<CudaOptions>().no_pdl;
  return on;
}

// Appends the programmatic-serialization attribute to attrs[n] when PDL is
// on; returns the new attribute count.
inline unsigned add_pdl_attribute(cudaLaunchAttribute* attrs, unsigned n) {
  if (!pdl_enabled()) return n;
  attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[n].val.programmaticStreamSerializationAllowed = 1;
  return n + 1;
}

// Launches `kernel` on `stream`, with PDL when `pdl` (and PDL is on).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? add_pdl_attribute(attr, 0) : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

// Launches `kernel` on `stream` with PDL (see the contract above).
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, Args... args) {
  return launch_kernel(true, kernel, grid, block, smem, stream, args...);
}

// Whether the kernels between the weight-streaming GEMVs (qkv_post, decode
// attention) start early too. Off: with them launched early, every kernel
// of a layer was resident at once, spinning in its wait, and the 0.5B
// decoded 7-8% slower than with no PDL at all (docs/CUDA.md). They still
// call pdl_launch_dependents(), so the GEMV after them may start early.
inline constexpr bool kPdlBetweenGemvs = false;

}  // namespace minfer::cuda
