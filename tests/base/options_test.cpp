// Options: one rule for every MINFER_* variable, errors that name it; the
// backends' sections read by the same rule and found by type.
#include "base/options.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "backend/backend_options.h"
#include "backend/cpu/cpu_options.h"
#include "backend/cuda/cuda_options.h"
#include "backend/metal/metal_options.h"
#include "backend/shader/shader_options.h"
#include "backend/vulkan/vulkan_options.h"

namespace minfer {
namespace {

// Every backend's section (header-only: these tests need no backend).
const OptionSection* const kSections[] = {
    option_section<metal::MetalOptions>(),   option_section<cuda::CudaOptions>(),
    option_section<vulkan::VulkanOptions>(), option_section<shader::ShaderOptions>(),
    option_section<backend::GpuOptions>(),   option_section<cpu::CpuOptions>(),
};

Result<Options> parse(const std::map<std::string, std::string>& env) {
  return Options::parse(
      [&](std::string_view name) -> std::optional<std::string> {
        auto it = env.find(std::string(name));
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      kSections);
}

const cuda::CudaOptions& cuda_of(const Result<Options>& o) {
  return o->section<cuda::CudaOptions>();
}
double timeout_of(const Result<Options>& o) {
  return o->section<backend::GpuOptions>().gpu_timeout_s;
}

TEST(Options, EmptyEnvironmentGivesTheDefaults) {
  auto o = parse({});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_FALSE(cuda_of(o).disable_cuda);
  EXPECT_EQ(cuda_of(o).cuda_device, 0);
  EXPECT_EQ(timeout_of(o), 10.0);
  EXPECT_EQ(o->section<vulkan::VulkanOptions>().vulkan_device, -1);
  EXPECT_FALSE(o->no_fuse_glu);
  EXPECT_TRUE(o->trace_dir.empty());
  // Empty values mean unset.
  o = parse({{"MINFER_GPU_TIMEOUT", ""}, {"MINFER_NO_FUSE_QKV", ""}});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(timeout_of(o), 10.0);
  EXPECT_FALSE(o->no_fuse_qkv);
}

TEST(Options, ASectionNotReadHasItsDefaults) {
  Options o;
  EXPECT_EQ(o.section<vulkan::VulkanOptions>().vulkan_device, -1);
  EXPECT_EQ(std::as_const(o).section<backend::GpuOptions>().gpu_timeout_s, 10.0);
  o.section<vulkan::VulkanOptions>().vulkan_device = 2;
  const Options copy = o;
  EXPECT_EQ(copy.section<vulkan::VulkanOptions>().vulkan_device, 2);
}

TEST(Options, FlagsFollowOneRule) {
  for (const char* on : {"1", "true", "YES", "On"}) {
    auto o = parse({{"MINFER_NO_FUSE_FFN", on}, {"MINFER_OP_PROFILE", on}, {"MINFER_NO_PDL", on}});
    ASSERT_TRUE(o.is_ok()) << on;
    EXPECT_TRUE(o->no_fuse_ffn) << on;
    EXPECT_TRUE(o->op_profile) << on;
    EXPECT_TRUE(cuda_of(o).no_pdl) << on;
  }
  for (const char* off : {"0", "false", "No", "OFF"}) {
    auto o = parse({{"MINFER_DISABLE_CUDA", off}});
    ASSERT_TRUE(o.is_ok()) << off;
    EXPECT_FALSE(cuda_of(o).disable_cuda) << off;
  }
  auto bad = parse({{"MINFER_DISABLE_CUDA", "2"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.message(), "MINFER_DISABLE_CUDA=2: expected 1/true/yes/on or 0/false/no/off");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  // The older name of a switch sets the same field.
  auto mps = parse({{"MINFER_DISABLE_MPS", "1"}});
  ASSERT_TRUE(mps.is_ok()) << mps.message();
  EXPECT_TRUE(mps->section<metal::MetalOptions>().disable_metal);
}

TEST(Options, NumbersParseWholeAndInRange) {
  auto o = parse({{"MINFER_CUDA_DEVICE", "3"}, {"MINFER_GPU_TIMEOUT", "2.5"}});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(cuda_of(o).cuda_device, 3);
  EXPECT_EQ(timeout_of(o), 2.5);
  const std::pair<const char*, const char*> bad[] = {
      {"MINFER_CUDA_DEVICE", "abc"}, {"MINFER_CUDA_DEVICE", "-1"}, {"MINFER_CUDA_DEVICE", "1x"},
      {"MINFER_GPU_TIMEOUT", "0"},   {"MINFER_GPU_TIMEOUT", "-3"}, {"MINFER_GPU_TIMEOUT", "nan"},
      {"MINFER_GPU_TIMEOUT", "ten"}};
  for (const auto& [name, value] : bad) {
    auto r = parse({{name, value}});
    ASSERT_FALSE(r.is_ok()) << name << "=" << value;
    EXPECT_TRUE(r.message().starts_with(std::string(name) + "=" + value + ": expected "))
        << r.message();
  }
  EXPECT_EQ(parse({{"MINFER_CUDA_DEVICE", "-1"}}).message(),
            "MINFER_CUDA_DEVICE=-1: expected an integer from 0 to 1023");
  EXPECT_EQ(parse({{"MINFER_GPU_TIMEOUT", "0"}}).message(),
            "MINFER_GPU_TIMEOUT=0: expected a number of seconds above 0, at most 86400");
}

TEST(Options, TextValuesAreKept) {
  auto o = parse({{"MINFER_TRACE", "/tmp/trace dir"},
                  {"MINFER_CACHE_TYPE", "q8_0"},
                  {"MINFER_METALLIB_FILE", "/x/k.metallib"}});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(o->trace_dir, "/tmp/trace dir");
  EXPECT_EQ(o->cache_type, "q8_0");
  EXPECT_EQ(o->section<metal::MetalOptions>().metallib_file, "/x/k.metallib");
}

TEST(Options, BatchInvarianceIsOnUnlessSwitchedOff) {
  auto on = parse({});
  ASSERT_TRUE(on.is_ok()) << on.message();
  EXPECT_TRUE(on->batch_invariant);
  auto off = parse({{"MINFER_BATCH_INVARIANT", "0"}});
  ASSERT_TRUE(off.is_ok()) << off.message();
  EXPECT_FALSE(off->batch_invariant);
}

TEST(Options, EveryVariableIsListedOnceWithHelp) {
  std::set<std::string> names;
  for (const OptionVariable& v : option_variables(kSections)) {
    EXPECT_TRUE(v.name.starts_with("MINFER_")) << v.name;
    EXPECT_FALSE(v.help.empty()) << v.name;
    EXPECT_TRUE(names.insert(std::string(v.name)).second) << "listed twice: " << v.name;
  }
  EXPECT_EQ(names.size(), 30u);
  EXPECT_EQ(option_variables().size(), Options::fields().size());
  // Each listed variable is read: setting it to junk is an error or is kept.
  for (const std::string& name : names) {
    auto r = parse({{name, "junk"}});
    const bool text = name == "MINFER_TRACE" || name == "MINFER_CACHE_TYPE" ||
                      name == "MINFER_QWEN2_TOKENIZER" || name == "MINFER_METALLIB_FILE";
    EXPECT_EQ(r.is_ok(), text) << name;
  }
}

}  // namespace
}  // namespace minfer
