// The tensor element types a GGUF file can hold (ggml's type ids) and their
// block geometry.
//
// Contract: a tensor of type T stores its rows as consecutive blocks of
// `block_size` elements, each `type_size` bytes; a row's element count must be
// a multiple of block_size. The table covers every type id GGUF files in the
// wild use, so that any such file can be read and inspected; which of them have
// a reference (de)quantization is quant/reference.h's business. Unknown ids are
// reported as errors, never guessed. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace minfer::quant {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct TypeTraits {
  TensorType type;
  std::string_view name;  // as llama.cpp spells it: "Q4_K", "F16", ...
  int64_t block_size;     // elements per block
  uint64_t type_size;     // bytes per block
};

// The traits of a raw type id, or nullptr if the id is not a known type.
const TypeTraits* find_type_traits(uint32_t raw_type);

// The traits of a known type (always valid for an enumerator).
const TypeTraits& type_traits(TensorType type);

inline std::string_view type_name(TensorType type) {
  return type_traits(type).name;
}

// Parses a type name case-insensitively ("q4_k", "F16"); error names the input.
Result<TensorType> parse_tensor_type(std::string_view name);

// Bytes of a row of n elements; error if n is negative or not a multiple of the
// block size, or if the byte count overflows.
Result<uint64_t> row_bytes(TensorType type, int64_t n);

}  // namespace minfer::quant
