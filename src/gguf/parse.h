// Internal to src/gguf: parses and validates one GGUF file held in memory.
//
// Contract: parse_part never reads outside `bytes`, and every allocation is
// bounded by the bytes actually present: counts are checked against the bytes
// left before anything is reserved, so memory stays within about 100x
// bytes.size() (the worst case is an array of u8, one Value per byte). Any
// inconsistency is an error whose message starts with `name`, then the field,
// then the offending value (see file.h for the full list of checks). The returned TensorInfo::data
// pointers point into `bytes`, so they are valid while those bytes are.
//
// Threading: pure function of its inputs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/file.h"
#include "gguf/value.h"

namespace minfer::gguf::detail {

struct ParsedPart {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, Value>> metadata;
  std::vector<TensorInfo> tensors;
};

Result<ParsedPart> parse_part(std::span<const uint8_t> bytes, const std::string& name,
                              uint32_t part_index);

}  // namespace minfer::gguf::detail
