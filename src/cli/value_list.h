// Value lists of `minfer bench` options, in llama-bench's syntax: "-p 512,2048"
// runs both values, and a range names many.
//
// Contract: parse_value_list() reads `text` as comma-separated items, each one
//   N               one value
//   FIRST-LAST      FIRST, FIRST+1, ... LAST
//   FIRST-LAST+S    FIRST, FIRST+S, ... up to LAST (S >= 1)
//   FIRST-LAST*M    FIRST, FIRST*M, ... up to LAST (M >= 2, FIRST >= 1)
// and returns the values in the order written (duplicates kept, as llama-bench
// runs them). Every value must lie in [min, max]; a range with LAST < FIRST,
// an empty item ("512,,1024", a trailing comma), text that is not a decimal
// integer, or a list of more than kMaxListValues values is an error. Messages
// start with `context` (the flag and value as the user spelled them, e.g.
// "-p 512,abc") and name the bad item: "-p 512,abc: 'abc' is not an integer".
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace minfer::cli {

// More values than this is a typo (a missing step, a wrong bound), not a plan:
// each value is at least one timed test.
inline constexpr size_t kMaxListValues = 1000;

Result<std::vector<int64_t>> parse_value_list(std::string_view context, std::string_view text,
                                              int64_t min, int64_t max);

}  // namespace minfer::cli
