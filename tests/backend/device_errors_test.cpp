// The device error words: the codes the compiled kernels hold keep their
// numbers, and each reported code becomes a Status of its kind whose message
// names the value, the bound, the backend and the kernel trail.
#include "backend/device_errors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace minfer::backend {
namespace {

// The numbers are in the SPIR-V and MSL (tests/backend/msl_digests.sha256):
// renumbering one would change what an old kernel's report means.
static_assert(MINFER_ERR_WORDS == 4);
static_assert(MINFER_ERR_NONE == 0u);
static_assert(MINFER_ERR_ROW_ID == 1u);
static_assert(MINFER_ERR_CACHE_ROW == 2u);
static_assert(MINFER_ERR_POSITION == 3u);
static_assert(MINFER_ERR_ROUTER_NAN == 4u);
static_assert(MINFER_ERR_EXPERT_ID == 5u);
static_assert(MINFER_ERR_NONFINITE_KV == 6u);

Status report(uint32_t code, uint32_t value, uint32_t bound) {
  const uint32_t words[MINFER_ERR_WORDS] = {code, value, bound, 0};
  return device_error(words, "GPU0", "last 1 kernels (oldest first): k 'n'");
}

TEST(DeviceErrors, EachCodeHasItsKindAndWords) {
  struct Case {
    uint32_t code, value, bound;
    StatusCode kind;
    std::string words;
  };
  const Case cases[] = {
      {MINFER_ERR_ROW_ID, 64, 64, StatusCode::kInvalidArgument, "token id 64 outside [0, 64)"},
      {MINFER_ERR_CACHE_ROW, 7, 4, StatusCode::kOutOfRange,
       "position 7 outside the KV cache of 4 rows"},
      {MINFER_ERR_POSITION, 9, 8, StatusCode::kOutOfRange,
       "position, slot or page 9 outside the KV cache or its tables (bound 8)"},
      {MINFER_ERR_ROUTER_NAN, 2, 4, StatusCode::kInvalidArgument,
       "NaN router logit in token 2 (of 4 experts)"},
      {MINFER_ERR_EXPERT_ID, 9, 4, StatusCode::kInvalidArgument, "expert id 9 outside [0, 4)"},
      {MINFER_ERR_NONFINITE_KV, 2, 0, StatusCode::kInvalidArgument,
       "non-finite value stored into the q8_0 KV cache row 2;"},
  };
  for (const Case& c : cases) {
    const Status s = report(c.code, c.value, c.bound);
    EXPECT_EQ(s.code(), c.kind) << s.message();
    EXPECT_NE(s.message().find(c.words), std::string::npos) << s.message();
    EXPECT_EQ(s.message().rfind("GPU0: a kernel reported ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("; last 1 kernels (oldest first): k 'n'"), std::string::npos)
        << s.message();
  }
}

TEST(DeviceErrors, ValuesAreTheI32TheKernelHad) {
  const Status s = report(MINFER_ERR_EXPERT_ID, static_cast<uint32_t>(-1), 4);
  EXPECT_NE(s.message().find("expert id -1 outside [0, 4)"), std::string::npos) << s.message();
}

TEST(DeviceErrors, AnUnknownCodeIsInternalAndNamesItsWords) {
  const Status s = report(99, 3, 5);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("error code 99 (value 3, bound 5)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::backend
