// Options: one rule for every MINFER_* variable, errors that name it.
#include "base/options.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace minfer {
namespace {

Result<Options> parse(const std::map<std::string, std::string>& env) {
  return Options::parse([&](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

TEST(Options, EmptyEnvironmentGivesTheDefaults) {
  auto o = parse({});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_FALSE(o->disable_cuda);
  EXPECT_EQ(o->cuda_device, 0);
  EXPECT_EQ(o->gpu_timeout_s, 10.0);
  EXPECT_FALSE(o->no_fuse_glu);
  EXPECT_TRUE(o->trace_dir.empty());
  // Empty values mean unset.
  o = parse({{"MINFER_GPU_TIMEOUT", ""}, {"MINFER_NO_FUSE_QKV", ""}});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(o->gpu_timeout_s, 10.0);
  EXPECT_FALSE(o->no_fuse_qkv);
}

TEST(Options, FlagsFollowOneRule) {
  for (const char* on : {"1", "true", "YES", "On"}) {
    auto o = parse({{"MINFER_NO_FUSE_FFN", on}, {"MINFER_OP_PROFILE", on}});
    ASSERT_TRUE(o.is_ok()) << on;
    EXPECT_TRUE(o->no_fuse_ffn) << on;
    EXPECT_TRUE(o->op_profile) << on;
  }
  for (const char* off : {"0", "false", "No", "OFF"}) {
    auto o = parse({{"MINFER_DISABLE_CUDA", off}});
    ASSERT_TRUE(o.is_ok()) << off;
    EXPECT_FALSE(o->disable_cuda) << off;
  }
  auto bad = parse({{"MINFER_DISABLE_CUDA", "2"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.message(), "MINFER_DISABLE_CUDA=2: expected 1/true/yes/on or 0/false/no/off");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Options, NumbersParseWholeAndInRange) {
  auto o = parse({{"MINFER_CUDA_DEVICE", "3"}, {"MINFER_GPU_TIMEOUT", "2.5"}});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(o->cuda_device, 3);
  EXPECT_EQ(o->gpu_timeout_s, 2.5);
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
}

TEST(Options, TextValuesAreKept) {
  auto o = parse({{"MINFER_TRACE", "/tmp/trace dir"}, {"MINFER_CACHE_TYPE", "q8_0"}});
  ASSERT_TRUE(o.is_ok()) << o.message();
  EXPECT_EQ(o->trace_dir, "/tmp/trace dir");
  EXPECT_EQ(o->cache_type, "q8_0");
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
  for (const OptionVariable& v : option_variables()) {
    EXPECT_TRUE(v.name.starts_with("MINFER_")) << v.name;
    EXPECT_FALSE(v.help.empty()) << v.name;
    EXPECT_TRUE(names.insert(std::string(v.name)).second) << "listed twice: " << v.name;
  }
  EXPECT_EQ(names.size(), 30u);
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
