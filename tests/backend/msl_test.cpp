// The MSL generated from the GPU kernels (src/backend/metal/msl.cmake), on
// every platform with SPIRV-Cross: every kernel variant of the table has its
// MSL and sidecar, the sidecar (what SPIRV-Cross reports having emitted)
// agrees with the host's kernel table under the ABI of msl_abi.h, the
// translation is reproducible, and the check refuses each kind of
// disagreement. The golden digests of the MSL are checked by the ctest
// msl_golden_digests (tests/CMakeLists.txt); this file checks that their
// list names every kernel. No Metal device is needed (nor used).
#include <gtest/gtest.h>

#if MINFER_HAS_MSL

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "backend/metal/msl_abi.h"
#include "backend/metal/msl_translate.h"
#include "backend/shader/kernel_table.h"
#include "backend/shader/spirv_reflect.h"

namespace minfer::metal {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return in ? std::string(std::istreambuf_iterator<char>(in), {}) : std::string();
}

std::string msl_path(const shader::KernelInfo& k, const char* ext) {
  return std::string(MINFER_MSL_DIR) + "/" + k.label() + ext;
}

MslSidecar sidecar_of(const shader::KernelInfo& k) {
  auto s = sidecar_from_json(read_text(msl_path(k, ".json")));
  EXPECT_TRUE(s.is_ok()) << k.label() << ": " << s.status().message();
  return s.is_ok() ? *s : MslSidecar{};
}

bool uses_subgroup_arithmetic(const shader::KernelInfo& k) {
  auto r = shader::reflect_spirv(k.spirv);
  if (!r.is_ok()) return false;
  for (uint32_t c : r->capabilities) {
    if (c == shader::spirv_capability::kGroupNonUniformArithmetic) return true;
  }
  return false;
}

TEST(Msl, EveryKernelVariantHasMslWhoseSidecarMatchesTheKernelTable) {
  ASSERT_FALSE(shader::embedded_kernels().empty());
  int with_subgroups = 0;
  for (const shader::KernelInfo& k : shader::embedded_kernels()) {
    SCOPED_TRACE(k.label());
    const std::string source = read_text(msl_path(k, ".metal"));
    ASSERT_FALSE(source.empty()) << "no " << msl_path(k, ".metal");
    EXPECT_NE(source.find("kernel void " + msl_entry_point(k.name, k.variant) + "("),
              std::string::npos);
    const MslSidecar s = sidecar_of(k);
    const Status abi = check_sidecar(k, s);
    EXPECT_TRUE(abi.is_ok()) << abi.message();
    if (k.push_size > 0) {
      EXPECT_NE(source.find("[[buffer(" + std::to_string(kMslArgsSlot) + ")]]"), std::string::npos);
    }
    if (uses_subgroup_arithmetic(k)) {  // subgroupAdd & co. are simd-group functions
      ++with_subgroups;
      EXPECT_NE(source.find("simd_"), std::string::npos);
    }
  }
  EXPECT_GT(with_subgroups, 0);
}

TEST(Msl, TranslatingTheEmbeddedSpirvAgainGivesTheSameBytes) {
  for (const shader::KernelInfo& k : shader::embedded_kernels()) {
    SCOPED_TRACE(k.label());
    auto again = translate_to_msl(k.spirv, k.name, k.variant);
    ASSERT_TRUE(again.is_ok()) << again.status().message();
    EXPECT_EQ(again->source, read_text(msl_path(k, ".metal")));
    EXPECT_EQ(sidecar_to_json(again->sidecar), read_text(msl_path(k, ".json")));
  }
}

TEST(Msl, TheGoldenDigestsNameEveryKernelVariant) {
  std::istringstream golden(read_text(std::string(MINFER_TEST_DATA_DIR) + "/msl_digests.sha256"));
  std::set<std::string> listed;
  for (std::string line; std::getline(golden, line);) {
    if (line.size() > 66) listed.insert(line.substr(66));  // "<64 hex>  <file>"
  }
  std::set<std::string> expected;
  for (const shader::KernelInfo& k : shader::embedded_kernels())
    expected.insert(k.label() + ".metal");
  EXPECT_EQ(listed, expected) << "run tools/gen_msl_digests.sh";
}

// A real kernel with bindings of every access and an arguments struct.
const shader::KernelInfo& attention() {
  const auto index = shader::find_kernel("attention", "f16_f16");
  EXPECT_TRUE(index.has_value());
  return shader::embedded_kernels()[index.value_or(0)];
}

void expect_refused(const MslSidecar& s, const std::string& says) {
  const Status st = check_sidecar(attention(), s);
  ASSERT_FALSE(st.is_ok()) << "accepted; expected: " << says;
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
}

TEST(Msl, TheSidecarCheckRefusesEachDisagreement) {
  const MslSidecar good = sidecar_of(attention());
  ASSERT_TRUE(check_sidecar(attention(), good).is_ok());
  MslSidecar s = good;
  s.entry = "main0";
  expect_refused(s, "entry point is 'main0'");
  s = good;
  s.threadgroup[0] = 128;
  expect_refused(s, "threadgroup is 128x1x1");
  s = good;
  s.buffers[1].index = 2;
  expect_refused(s, "is [[buffer(2)]], the ABI says [[buffer(1)]]");
  s = good;
  s.buffers.back().binding = 40;
  s.buffers.back().index = 40;
  expect_refused(s, "has binding 40");
  s = good;
  s.buffers[0].writable = true;  // q is read-only in the manifest
  expect_refused(s, "('q') is writable in the kernel, read-only in its manifest");
  s = good;
  s.args_index = 8;
  expect_refused(s, "arguments are [[buffer(8)]]");
  s = good;
  s.args_bytes += 4;
  expect_refused(s, "arguments struct has");
  s = good;
  s.args_index.reset();
  expect_refused(s, "has no arguments struct");
  s = good;
  s.variant = "f32_f32";
  expect_refused(s, "sidecar is for attention.f32_f32");
}

TEST(Msl, SidecarJsonRoundTripsAndNamesABadField) {
  const MslSidecar good = sidecar_of(attention());
  auto back = sidecar_from_json(sidecar_to_json(good));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(sidecar_to_json(*back), sidecar_to_json(good));
  EXPECT_TRUE(check_sidecar(attention(), *back).is_ok());

  const auto bad = [](const std::string& json, const std::string& says) {
    auto r = sidecar_from_json(json);
    ASSERT_FALSE(r.is_ok()) << json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  bad("[1]", "not a JSON object");
  bad("{not json", "MSL sidecar: JSON line 1, column 3: syntax error");
  bad(R"({"kernel": "a", "variant": "b", "entry": "a_b", "threadgroup": [1, 1, 1],
          "buffers": [], "args_bytes": 0})",
      "MSL sidecar: no \"args_index\"");
  bad(R"({"kernel": 3, "variant": "b", "entry": "a_b", "threadgroup": [1, 1, 1],
          "buffers": [], "args_index": null, "args_bytes": 0})",
      "\"kernel\" is not a string");
  bad(R"({"kernel": "a", "variant": "b", "entry": "a_b", "threadgroup": [1, 1],
          "buffers": [], "args_index": null, "args_bytes": 0})",
      "\"threadgroup\" is not three sizes");
  bad(R"({"kernel": "a", "variant": "b", "entry": "a_b", "threadgroup": [1, 1, 1],
          "buffers": [{"binding": 0}], "args_index": null, "args_bytes": 0})",
      "no \"index\"");
  bad(R"({"kernel": "a", "variant": "b", "entry": "a_b", "threadgroup": [1, 1, 1],
          "buffers": [{"binding": -1, "index": 0, "name": "x", "writable": true}],
          "args_index": null, "args_bytes": 0})",
      "\"binding\": expected an integer in [0, 4294967295]");
}

}  // namespace
}  // namespace minfer::metal

#else

TEST(Msl, NeedsSpirvCross) {
  GTEST_SKIP() << "built without MINFER_MSL (SPIRV-Cross not found)";
}

#endif  // MINFER_HAS_MSL
