// The expert matmul on the int8 tensor cores (launch_mmq_id, kernels.h):
// the routed rows (token t's j-th expert, row i = t * n_used + j) are
// grouped by expert, and one launch takes every expert's groups, each
// block one group of up to 8 NJ rows against 16-row tiles of that expert's
// matrix (mmq_tile.cuh's arithmetic). A batch reads each selected expert's
// weights once per group rather than once per routed row, and no launch is
// made per expert.
//
//   1. moe_group_kernel (one block): counts the rows of each expert, lays
//      the experts' rows out one after another (sorted) and cuts each
//      expert's run into groups of at most 8 NJ rows, their count into
//      n_groups. The grid of step 2 is sized on the host for the most
//      groups any routing can give, ceil(rows / 8 NJ) + min(experts, rows)
//      (a CUDA graph replays it for any routing); blocks past n_groups
//      leave at once.
//   2. mmq_id_kernel: grid x the row blocks of one expert's matrix, grid y
//      the groups.
//
// Batch invariance: a routed row's sums depend on its activation and its
// expert's weights only (the slices from the matrix shape, mmq_tile.cuh),
// never on which rows share its group, so a token gives the same bits in
// any batch, and whatever order the rows of one expert take in `sorted`.
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/mmq_formats.cuh"
#include "backend/cuda/mmq_tile.cuh"

namespace minfer::cuda {
namespace {

using mmq::FormatOf;
using mmq::kMinBlocks;
using mmq::kWarps;
using mmq::MmqArgs;

constexpr int kGroupThreads = 1024;

struct Group {
  int32_t expert, start, count;  // rows sorted[start .. start + count)
};

struct Work {
  int32_t* sorted;  // [n_rows]
  Group* groups;    // [max_groups]
  int32_t* n_groups;
};

int64_t max_groups(int64_t n_rows, int n_expert, int group_rows) {
  return (n_rows + group_rows - 1) / group_rows + (n_rows < n_expert ? n_rows : n_expert);
}

Work carve(void* work, int64_t n_rows, int n_expert) {
  auto* base = static_cast<int32_t*>(work);
  const int64_t groups = max_groups(n_rows, n_expert, 8);
  return {base, reinterpret_cast<Group*>(base + n_rows),
          base + n_rows + groups * (sizeof(Group) / sizeof(int32_t))};
}

__device__ void report_once(int* err, int code, int a, int b) {
  if (atomicCAS(err, kErrNone, code) == kErrNone) {
    err[1] = a;
    err[2] = b;
  }
}

__global__ void __launch_bounds__(kGroupThreads)
    moe_group_kernel(const int32_t* __restrict__ ids, int64_t n_rows, int n_expert, int group_rows,
                     Work work, int* err) {
  __shared__ int count[kMoeMaxExperts], first[kMoeMaxExperts], group0[kMoeMaxExperts],
      fill[kMoeMaxExperts];
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) count[e] = fill[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n_rows; i += blockDim.x) {
    int e = ids[i];
    if (e < 0 || e >= n_expert) {
      report_once(err, kErrExpertRange, e, n_expert);
      e = 0;  // a valid expert for the product; the step fails on the report
    }
    atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int rows = 0, groups = 0;
    for (int e = 0; e < n_expert; ++e) {
      first[e] = rows;
      group0[e] = groups;
      rows += count[e];
      groups += (count[e] + group_rows - 1) / group_rows;
    }
    *work.n_groups = groups;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n_rows; i += blockDim.x) {
    int e = ids[i];
    if (e < 0 || e >= n_expert) e = 0;
    work.sorted[first[e] + atomicAdd(&fill[e], 1)] = static_cast<int32_t>(i);
  }
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    for (int k = 0; k * group_rows < count[e]; ++k) {
      const int left = count[e] - k * group_rows;
      work.groups[group0[e] + k] = {e, first[e] + k * group_rows,
                                    left < group_rows ? left : group_rows};
    }
  }
}

struct IdArgs {
  MmqArgs m;  // expert 0's matrix and bias; y [n_rows][rows]
  size_t expert_bytes;
  bool per_row_input;
  int n_used;
  Work work;
};

// The rows of one group (mmq_tile.cuh's Map).
struct GroupRows {
  const IdArgs& a;
  const int32_t* rows;
  int count;
  __device__ __forceinline__ int64_t row(int k) const {
    return __ldg(rows + (k < count ? k : count - 1));
  }
  __device__ __forceinline__ const int8_t* x(int k) const {
    const int64_t i = row(k);
    return a.m.xq + (a.per_row_input ? i : i / a.n_used) * a.m.x_stride;
  }
  __device__ __forceinline__ bool out(int k, int64_t& o) const {
    o = row(k) * a.m.rows;
    return k < count;
  }
};

template <quant::TensorType T, int NJ>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks<T, NJ>)
    mmq_id_kernel(const __grid_constant__ IdArgs a) {
  if (static_cast<int32_t>(blockIdx.y) >= *a.work.n_groups) return;  // the whole block
  const Group grp = a.work.groups[blockIdx.y];
  MmqArgs e = a.m;
  e.w += static_cast<size_t>(grp.expert) * a.expert_bytes;
  if (e.bias != nullptr) e.bias += static_cast<int64_t>(grp.expert) * e.rows;
  mmq::mmq_tile<T, NJ>(e, blockIdx.x, GroupRows{a, a.work.sorted + grp.start, grp.count});
}

bool aligned(const void* p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

}  // namespace

bool has_mmq_id(quant::TensorType type, int64_t in_dim) {
  int64_t block = 0;
  (void)mmq::dispatch_tile</*kMxfp4=*/true>(
      type, [&](auto tag) { block = 32 * FormatOf<decltype(tag)::value>::F::kUnits; });
  return block > 0 && in_dim > 0 && in_dim % block == 0;
}

size_t mmq_id_work_bytes(int64_t n_rows, int n_expert) {
  const int64_t groups = max_groups(n_rows, n_expert, 8);
  return static_cast<size_t>(n_rows + groups * 3 + 1) * sizeof(int32_t);
}

cudaError_t launch_mmq_id(const MmqIdArgs& id, cudaStream_t stream) {
  const MatMulIdArgs& a = id.m;
  const int64_t n_rows = a.n_tokens * a.n_used;
  const bool k_quant = quant::type_traits(a.type).block_size == 256;
  const bool needs16 = a.type == quant::TensorType::Q4_K || a.type == quant::TensorType::Q5_K;
  if (!has_mmq_id(a.type, a.in_dim) || n_rows < 1 || a.rows < 1 || a.n_expert < 1 ||
      a.n_expert > kMoeMaxExperts || id.xq == nullptr || id.work == nullptr ||
      (needs16 && (!aligned(a.w, 16) || a.row_bytes % 16 != 0 || a.expert_bytes % 16 != 0))) {
    return cudaErrorInvalidValue;
  }
  // Groups of 16 rows where experts get more than 8 rows each on average.
  const int64_t active = n_rows < a.n_expert ? n_rows : a.n_expert;
  const int nj = n_rows > 8 * active ? 2 : 1;
  const int64_t groups = max_groups(n_rows, static_cast<int>(a.n_expert), 8 * nj);
  if (groups > 65535) return cudaErrorInvalidValue;  // grid y's limit
  const Work work = carve(id.work, n_rows, static_cast<int>(a.n_expert));
  moe_group_kernel<<<1, kGroupThreads, 0, stream>>>(a.ids, n_rows, static_cast<int>(a.n_expert),
                                                    8 * nj, work, a.err);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  cudaError_t err = cudaErrorInvalidValue;
  (void)mmq::dispatch_tile</*kMxfp4=*/true>(a.type, [&](auto tag) {
    constexpr quant::TensorType T = decltype(tag)::value;
    using F = typename FormatOf<T>::F;
    const int64_t n_blocks = a.in_dim / (32 * F::kUnits);
    const int slices = mmq::slices_for(a.rows, n_blocks, k_quant, kWarps * kMinBlocks<T>);
    IdArgs args{
        MmqArgs{static_cast<const uint8_t*>(a.w), a.row_bytes, a.rows, n_blocks, id.xq,
                static_cast<int64_t>(q8_activation_bytes(a.in_dim)),
                a.per_row_input ? n_rows : a.n_tokens, a.in_dim / 32, slices, a.bias, nullptr, a.y},
        a.expert_bytes, a.per_row_input, a.n_used, work};
    const int64_t rows_per_block = 16 * (kWarps / slices);
    const dim3 grid(static_cast<unsigned>((a.rows + rows_per_block - 1) / rows_per_block),
                    static_cast<unsigned>(groups));
    if (nj == 2) {
      mmq_id_kernel<T, 2><<<grid, kWarps * 32, 0, stream>>>(args);
    } else {
      mmq_id_kernel<T, 1><<<grid, kWarps * 32, 0, stream>>>(args);
    }
    err = cudaGetLastError();
  });
  return err;
}

}  // namespace minfer::cuda
