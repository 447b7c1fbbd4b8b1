#include "quant/tensor_type.h"

#include <array>
#include <cctype>
#include <limits>
#include <string>

namespace minfer::quant {
namespace {

// Block geometry per type id (ggml's; checked against the gguf Python package's
// GGML_QUANT_SIZES by tests/quant, except Q8_1, where gguf-py still lists an
// older 40-byte layout; ggml's in-memory block_q8_1 is 36 bytes).
constexpr std::array kTypes = {
    TypeTraits{TensorType::F32, "F32", 1, 4},
    TypeTraits{TensorType::F16, "F16", 1, 2},
    TypeTraits{TensorType::Q4_0, "Q4_0", 32, 18},
    TypeTraits{TensorType::Q4_1, "Q4_1", 32, 20},
    TypeTraits{TensorType::Q5_0, "Q5_0", 32, 22},
    TypeTraits{TensorType::Q5_1, "Q5_1", 32, 24},
    TypeTraits{TensorType::Q8_0, "Q8_0", 32, 34},
    TypeTraits{TensorType::Q8_1, "Q8_1", 32, 36},
    TypeTraits{TensorType::Q2_K, "Q2_K", 256, 84},
    TypeTraits{TensorType::Q3_K, "Q3_K", 256, 110},
    TypeTraits{TensorType::Q4_K, "Q4_K", 256, 144},
    TypeTraits{TensorType::Q5_K, "Q5_K", 256, 176},
    TypeTraits{TensorType::Q6_K, "Q6_K", 256, 210},
    TypeTraits{TensorType::Q8_K, "Q8_K", 256, 292},
    TypeTraits{TensorType::IQ2_XXS, "IQ2_XXS", 256, 66},
    TypeTraits{TensorType::IQ2_XS, "IQ2_XS", 256, 74},
    TypeTraits{TensorType::IQ3_XXS, "IQ3_XXS", 256, 98},
    TypeTraits{TensorType::IQ1_S, "IQ1_S", 256, 50},
    TypeTraits{TensorType::IQ4_NL, "IQ4_NL", 32, 18},
    TypeTraits{TensorType::IQ3_S, "IQ3_S", 256, 110},
    TypeTraits{TensorType::IQ2_S, "IQ2_S", 256, 82},
    TypeTraits{TensorType::IQ4_XS, "IQ4_XS", 256, 136},
    TypeTraits{TensorType::I8, "I8", 1, 1},
    TypeTraits{TensorType::I16, "I16", 1, 2},
    TypeTraits{TensorType::I32, "I32", 1, 4},
    TypeTraits{TensorType::I64, "I64", 1, 8},
    TypeTraits{TensorType::F64, "F64", 1, 8},
    TypeTraits{TensorType::IQ1_M, "IQ1_M", 256, 56},
    TypeTraits{TensorType::BF16, "BF16", 1, 2},
    TypeTraits{TensorType::TQ1_0, "TQ1_0", 256, 54},
    TypeTraits{TensorType::TQ2_0, "TQ2_0", 256, 66},
    TypeTraits{TensorType::MXFP4, "MXFP4", 32, 17},
};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const TypeTraits* find_type_traits(uint32_t raw_type) {
  for (const auto& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == raw_type) return &t;
  }
  return nullptr;
}

const TypeTraits& type_traits(TensorType type) {
  const TypeTraits* t = find_type_traits(static_cast<uint32_t>(type));
  assert(t != nullptr && "TensorType enumerator missing from the traits table");
  return *t;
}

Result<TensorType> parse_tensor_type(std::string_view name) {
  for (const auto& t : kTypes) {
    if (iequal(t.name, name)) return t.type;
  }
  return Status::invalid_argument("unknown tensor type '" + std::string(name) + "'");
}

Result<uint64_t> row_bytes(TensorType type, int64_t n) {
  const TypeTraits& t = type_traits(type);
  if (n < 0 || n % t.block_size != 0) {
    return Status::invalid_argument("row of " + std::to_string(n) +
                                    " elements is not a multiple of " + std::string(t.name) +
                                    "'s block size " + std::to_string(t.block_size));
  }
  const uint64_t blocks = static_cast<uint64_t>(n / t.block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / t.type_size) {
    return Status::invalid_argument("row of " + std::to_string(n) + " " + std::string(t.name) +
                                    " elements overflows a 64-bit byte count");
  }
  return blocks * t.type_size;
}

}  // namespace minfer::quant
