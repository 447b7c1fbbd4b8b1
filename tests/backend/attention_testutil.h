// Helpers shared by the CPU attention tests (attention_test.cpp and
// attention_sinks_test.cpp): the cache types of cpu::attention (KvType) as
// tensor types and names, and one cache region encoded as the kernel reads it
// with the values its rows decode to.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/ops.h"
#include "quant/tensor_type.h"

namespace minfer::cpu::testing {

inline quant::TensorType kv_tensor_type(KvType t) {
  return t == KvType::kF16    ? quant::TensorType::F16
         : t == KvType::kQ8_0 ? quant::TensorType::Q8_0
                              : quant::TensorType::F32;
}

inline const char* kv_type_name(KvType t) {
  return t == KvType::kF16 ? "f16" : t == KvType::kQ8_0 ? "q8_0" : "f32";
}

// One cache region: the encoded rows the kernel reads and the values they hold.
struct KvRegion {
  KvType type = KvType::kF32;
  std::vector<float> exact;  // what was stored
  std::vector<uint8_t> bytes;
  std::vector<float> seen;  // what the rows decode to
};

inline KvRegion make_kv_region(const std::vector<float>& x, KvType type) {
  KvRegion r{type, x, {}, {}};
  if (type == KvType::kF32) {
    r.bytes.resize(x.size() * sizeof(float));
    std::memcpy(r.bytes.data(), x.data(), r.bytes.size());
    r.seen = x;
  } else {
    r.bytes = encode(kv_tensor_type(type), x);
    r.seen = decode(kv_tensor_type(type), r.bytes.data(), static_cast<int64_t>(x.size()));
  }
  return r;
}

}  // namespace minfer::cpu::testing
