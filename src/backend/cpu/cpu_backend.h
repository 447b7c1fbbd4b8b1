// CpuBackend: runs every graph op on the host, with llama.cpp's CPU numerics
// (activations quantized to the weight's vec_dot_type before each matmul;
// docs/ARCHITECTURE.md, "Contracts" 7).
//
// Buffers are host allocations (64-byte aligned) addressed by id; read_host /
// write_host are memcpys and synchronize() is a no-op. Weights are read in
// place from the model's weight table (the mmap), looked up by name at
// execute time; a matmul weight of a packable type (backend/cpu/
// matmul_packed.h) is instead read from a repacked copy made at its first
// use and kept for the backend's life (unless repack_weights is off). execute_node handles in-place
// aliasing of output and input. Errors name the node and the tensor; nothing is handed to another
// backend. Threading: one executor thread drives it; kernels run on its thread pool.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_packed.h"
#include "backend/cpu/moe.h"
#include "base/thread_pool.h"
#include "model/weights.h"
#include "parallel/communicator.h"

namespace minfer::cpu {

struct AttentionShape;

class CpuBackend final : public backend::Backend {
 public:
  // n_threads <= 0: one per hardware thread. `weights` must outlive the backend.
  // `comm` (optional): this rank's communicator in a tensor-parallel group;
  // with one, the backend runs the collectives (kAllReduce, kAllGather).
  CpuBackend(const model::Weights& weights, int n_threads, bool repack_weights = true,
             parallel::Communicator* comm = nullptr);
  // As the constructor, but an error when the system cannot start all
  // n_threads threads (ThreadPool::start_status()).
  static Result<std::unique_ptr<CpuBackend>> create(const model::Weights& weights, int n_threads,
                                                    bool repack_weights = true,
                                                    parallel::Communicator* comm = nullptr);

  std::string_view name() const override { return "CPU"; }
  bool supports_op(const graph::Node& node) const override;
  bool supports_fused(graph::Op fused) const override;
  bool has_weight(std::string_view name) const override;

  Result<backend::BufferId> alloc_buffer(size_t bytes) override;
  void free_buffer(backend::BufferId id) override;
  size_t buffer_size(backend::BufferId id) const override;

  Status execute_node(const graph::Node& node, std::span<const backend::BufferId> inputs,
                      backend::BufferId out, const backend::KvPair* kv) override;

  Status read_host(backend::BufferId id, size_t offset, std::span<std::byte> dst) override;
  Status write_host(backend::BufferId id, size_t offset, std::span<const std::byte> src) override;

  ThreadPool& pool() { return pool_; }

  // What one op's kernel gets: the node, its input and output host pointers,
  // and the layer's KV regions (null unless the op uses them).
  struct Call {
    const graph::Node& node;
    std::span<const void* const> in;
    void* out;
    void* k_cache;
    void* v_cache;
    const backend::KvPair* kv;
    std::span<const size_t> in_bytes;  // size of each input's buffer
  };

  // Op kernels, reached through the op table in cpu_backend.cpp.
  Status run_matmul(const Call& c);
  Status run_get_rows(const Call& c);
  Status run_rms_norm(const Call& c);
  Status run_rope(const Call& c);
  Status run_kv_store(const Call& c);
  Status run_attention(const Call& c);
  Status paged_view(const Call& c, const graph::AttentionMeta& m, AttentionShape& shape) const;
  Status run_elementwise(const Call& c);
  Status run_argmax(const Call& c);
  // Mixture of experts (cpu_kernels_moe.cpp, backend/cpu/moe.h).
  Status run_moe_topk(const Call& c);
  Status run_moe_weights(const Call& c);
  Status run_matmul_id(const Call& c);
  Status run_moe_sum(const Call& c);
  // Tensor-parallel collectives (cpu_kernels_parallel.cpp).
  Status run_all_reduce(const Call& c);
  Status run_all_gather(const Call& c);
  parallel::Communicator* communicator() const { return comm_; }

 private:
  struct Buffer {
    std::unique_ptr<std::byte[], void (*)(std::byte*)> data{nullptr, nullptr};
    size_t size = 0;
    bool live = false;
  };
  std::byte* ptr(backend::BufferId id) const;

  // The packed copy of a matmul weight, made on first use; null where the
  // weight's rows are read as they are.
  Result<const PackedWeight*> packed(const std::string& name, const MatmulWeight& w);

  const model::Weights& weights_;
  ThreadPool pool_;
  bool repack_weights_ = true;
  parallel::Communicator* comm_ = nullptr;
  std::vector<float> gathered_;  // all_gather's rank-major staging
  std::unordered_map<std::string, PackedWeight> packed_;
  std::vector<Buffer> buffers_;
  std::vector<uint8_t> scratch_;  // quantized activations for matmul
  std::vector<float> staging_;    // matmul output when it aliases its input
  MoeScratch moe_scratch_;        // the expert matmul's gathered rows
};

}  // namespace minfer::cpu
