#include "quant/reference.h"

#include <cmath>
#include <cstring>
#include <string>

#include "quant/half.h"
#include "quant/reference_internal.h"

namespace minfer::quant {
namespace {

using DequantizeFn = void (*)(const void*, float*, int64_t);
using QuantizeFn = void (*)(const float*, void*, int64_t);

struct Kernels {
  DequantizeFn dequantize;
  QuantizeFn quantize;
};

// F32/F16/BF16 are "blocks" of one element, so they share the block-wise
// dispatch below.
void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void dequantize_f16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(detail::load_block<uint16_t>(src, i));
}
void quantize_f16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) detail::store_block<uint16_t>(dst, i, f32_to_f16(src[i]));
}
void dequantize_bf16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(detail::load_block<uint16_t>(src, i));
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) detail::store_block<uint16_t>(dst, i, f32_to_bf16(src[i]));
}

Kernels kernels_for(TensorType type) {
  using namespace detail;
  switch (type) {
    case TensorType::F32:
      return {dequantize_f32, quantize_f32};
    case TensorType::F16:
      return {dequantize_f16, quantize_f16};
    case TensorType::BF16:
      return {dequantize_bf16, quantize_bf16};
    case TensorType::Q4_0:
      return {dequantize_q4_0, quantize_q4_0};
    case TensorType::Q4_1:
      return {dequantize_q4_1, quantize_q4_1};
    case TensorType::Q5_0:
      return {dequantize_q5_0, quantize_q5_0};
    case TensorType::Q5_1:
      return {dequantize_q5_1, quantize_q5_1};
    case TensorType::Q8_0:
      return {dequantize_q8_0, quantize_q8_0};
    case TensorType::Q8_1:
      return {dequantize_q8_1, quantize_q8_1};
    case TensorType::Q2_K:
      return {dequantize_q2_k, quantize_q2_k};
    case TensorType::Q3_K:
      return {dequantize_q3_k, quantize_q3_k};
    case TensorType::Q4_K:
      return {dequantize_q4_k, quantize_q4_k};
    case TensorType::Q5_K:
      return {dequantize_q5_k, quantize_q5_k};
    case TensorType::Q6_K:
      return {dequantize_q6_k, quantize_q6_k};
    case TensorType::Q8_K:
      return {dequantize_q8_k, quantize_q8_k};
    case TensorType::MXFP4:
      return {dequantize_mxfp4, quantize_mxfp4};
    default:
      return {nullptr, nullptr};
  }
}

bool is_float_type(TensorType type) {
  return type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16;
}

// Shared argument checks; returns the number of blocks on success.
Result<int64_t> block_count(TensorType type, const void* src, const void* dst, int64_t n,
                            const char* what) {
  const TypeTraits& t = type_traits(type);
  const std::string name(t.name);
  if (n < 0 || n % t.block_size != 0) {
    return Status::invalid_argument(std::string(what) + " " + name + ": n = " + std::to_string(n) +
                                    " is not a non-negative multiple of the block size " +
                                    std::to_string(t.block_size));
  }
  if (n > 0 && (src == nullptr || dst == nullptr)) {
    return Status::invalid_argument(std::string(what) + " " + name +
                                    ": null buffer for n = " + std::to_string(n));
  }
  return n / t.block_size;
}

}  // namespace

bool has_reference_dequantize(TensorType type) {
  return kernels_for(type).dequantize != nullptr;
}
bool has_reference_quantize(TensorType type) {
  return kernels_for(type).quantize != nullptr;
}

bool is_weight_type(TensorType type) {
  return has_reference_dequantize(type) && type != TensorType::Q8_1 && type != TensorType::Q8_K;
}

std::string weight_type_names() {
  std::string out;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const TypeTraits* t = find_type_traits(raw);
    if (t == nullptr || !is_weight_type(t->type)) continue;
    out += (out.empty() ? "" : ", ") + std::string(t->name);
  }
  return out;
}

Status dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
  const Kernels k = kernels_for(type);
  if (k.dequantize == nullptr) {
    return Status::invalid_argument("dequantize: no reference implementation for type " +
                                    std::string(type_name(type)));
  }
  MINFER_ASSIGN_OR_RETURN(const int64_t nb, block_count(type, src, dst, n, "dequantize"));
  if (nb > 0) k.dequantize(src, dst, nb);
  return Status::ok();
}

Status quantize_row(TensorType type, const float* src, void* dst, int64_t n) {
  const Kernels k = kernels_for(type);
  if (k.quantize == nullptr) {
    return Status::invalid_argument("quantize: no reference implementation for type " +
                                    std::string(type_name(type)));
  }
  MINFER_ASSIGN_OR_RETURN(const int64_t nb, block_count(type, src, dst, n, "quantize"));
  // Block scales derived from inf/NaN would poison or overflow every element of
  // the block, and the integer conversions would be meaningless.
  if (!is_float_type(type)) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(src[i])) {
        return Status::invalid_argument("quantize " + std::string(type_name(type)) +
                                        ": non-finite input at index " + std::to_string(i));
      }
    }
  }
  if (nb > 0) k.quantize(src, dst, nb);
  return Status::ok();
}

}  // namespace minfer::quant
