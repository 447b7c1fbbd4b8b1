// preferred_cache_type (runtime/kv_cache.h): the first backend that prefers
// a cache type for the model's shape sets it; none prefers, nullopt (the
// runtime's default stands). A backend that states only that preference.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "runtime/kv_cache.h"

namespace minfer::runtime {
namespace {

using quant::TensorType;

class Preferring final : public backend::Backend {
 public:
  explicit Preferring(std::optional<TensorType> small, int64_t from = 8192)
      : small_(small), from_(from) {}
  std::string_view name() const override { return "Preferring"; }
  bool supports_op(const graph::Node&) const override { return false; }
  bool has_weight(std::string_view) const override { return false; }
  Result<backend::BufferId> alloc_buffer(size_t) override { return Status::unimplemented("none"); }
  void free_buffer(backend::BufferId) override {}
  size_t buffer_size(backend::BufferId) const override { return 0; }
  Status execute_node(const graph::Node&, std::span<const backend::BufferId>, backend::BufferId,
                      const backend::KvPair*) override {
    return Status::unimplemented("none");
  }
  Status read_host(backend::BufferId, size_t, std::span<std::byte>) override {
    return Status::unimplemented("none");
  }
  Status write_host(backend::BufferId, size_t, std::span<const std::byte>) override {
    return Status::unimplemented("none");
  }
  std::optional<TensorType> default_cache_type(int64_t n_layer, int64_t n_kv_embd) const override {
    if (!small_) return std::nullopt;
    return n_layer * n_kv_embd >= from_ ? TensorType::F16 : *small_;
  }

 private:
  std::optional<TensorType> small_;
  int64_t from_;
};

TEST(PreferredCacheType, TheFirstBackendWithAPreferenceDecides) {
  const Preferring none(std::nullopt), f32(TensorType::F32), q8(TensorType::Q8_0);
  const KvCacheShape small{24, 4096, 2, 64}, big{28, 4096, 4, 128};
  EXPECT_EQ(preferred_cache_type(std::vector<const backend::Backend*>{&none, &f32, &q8}, small),
            TensorType::F32);
  EXPECT_EQ(preferred_cache_type(std::vector<const backend::Backend*>{&none, &f32}, big),
            TensorType::F16);
  EXPECT_EQ(preferred_cache_type(std::vector<const backend::Backend*>{&q8, &f32}, small),
            TensorType::Q8_0);
  EXPECT_FALSE(preferred_cache_type(std::vector<const backend::Backend*>{&none}, small));
  EXPECT_FALSE(preferred_cache_type(std::vector<const backend::Backend*>{}, small));
}

}  // namespace
}  // namespace minfer::runtime
