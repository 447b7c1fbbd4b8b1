// The Vulkan activation kernels (unary, glu, argmax, gather_rows) against the
// CPU backend's own functions (backend/cpu/ops.h) or the CPU's loops, at odd
// sizes (1, 7, 4099, 2^20 + 3), in place, past one grid row (folded), and
// malformed calls refused. Tolerances: scale and the gather are exact; silu,
// swiglu and swiglu_oai (gpt-oss's clamped form: inputs around the limit of
// 7, large, infinite and NaN, which stays NaN) within 1e-5 relative; gelu and
// geglu equal to the CPU's but for an f16 ulp where the f32 value sits at an
// f16 rounding midpoint (counted: at most 0.1% of the elements).
#ifdef MINFER_HAS_VULKAN

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/ops.h"
#include "backend/shader/encode_activation.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/recorder.h"
#include "backend/vulkan_testutil.h"
#include "quant/half.h"

namespace minfer::vulkan::testing {
namespace {

using cpu::testing::random_floats;
using shader::GluOp;
using shader::UnaryOp;

constexpr int64_t kSizes[] = {1, 7, 4099, (int64_t{1} << 20) + 3};
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename T>
std::unique_ptr<shader::Buffer> upload_vector(shader::Device& d, const std::vector<T>& v) {
  return upload(d, std::as_bytes(std::span(v)));
}

template <typename T>
std::vector<T> download_vector(shader::Device& d, const shader::Buffer& b, size_t n) {
  std::vector<T> out(n);
  const Status s = d.read_buffer(b, 0, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

// How a GPU result compares with the CPU's.
struct Diff {
  double max_rel = 0;       // |gpu - cpu| / |cpu| (0 where equal)
  size_t unequal = 0;       // elements not bit-equal
  size_t past_f16_ulp = 0;  // elements further than one f16 ulp (+ 1e-6 absolute)
  std::string first;        // the first few unequal elements, for the failure message
};

Diff compare(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  EXPECT_EQ(gpu.size(), cpu.size());
  Diff d;
  for (size_t i = 0; i < gpu.size() && i < cpu.size(); ++i) {
    if (gpu[i] == cpu[i]) continue;
    if (++d.unequal <= 8) {
      d.first += " [" + std::to_string(i) + "] " + std::to_string(gpu[i]) + " vs " +
                 std::to_string(cpu[i]);
    }
    const double diff = std::abs(double(gpu[i]) - double(cpu[i]));
    const double rel = diff / std::abs(double(cpu[i]));
    d.max_rel = rel > d.max_rel || rel != rel ? rel : d.max_rel;  // NaN counts as largest
    if (!(diff <= std::abs(double(cpu[i])) * 0x1p-10 + 1e-6)) ++d.past_f16_ulp;
  }
  return d;
}

std::vector<float> cpu_unary(UnaryOp op, const std::vector<float>& x, float scale) {
  std::vector<float> y(x.size());
  const auto n = static_cast<int64_t>(x.size());
  if (op == UnaryOp::kScale) cpu::scale(x.data(), n, scale, y.data());
  if (op == UnaryOp::kSilu) cpu::silu(x.data(), n, y.data());
  if (op == UnaryOp::kGelu) cpu::gelu(x.data(), n, y.data());
  return y;
}

std::vector<float> cpu_glu(GluOp op, const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> y(gate.size());
  const auto n = static_cast<int64_t>(gate.size());
  if (op == GluOp::kSwiGLU) cpu::swiglu(gate.data(), up.data(), n, y.data());
  if (op == GluOp::kGeGLU) cpu::geglu(gate.data(), up.data(), n, y.data());
  return y;
}

// The tolerance of the file's header, per op.
void expect_close(const Diff& d, bool f16_path, size_t n, const std::string& what) {
  if (f16_path) {
    EXPECT_EQ(d.past_f16_ulp, 0u) << what << d.first;
    EXPECT_LE(d.unequal, n / 1000) << what << d.first;
  } else {
    EXPECT_LT(d.max_rel, 1e-5) << what << d.first;
  }
}

std::vector<float> run_unary(UnaryOp op, const std::vector<float>& x, float scale, bool in_place) {
  shader::Device& d = device();
  auto gx = upload_floats(d, x);
  auto gy = in_place ? nullptr : zeros(d, x.size() * 4);
  const shader::BufferRange out = in_place ? whole(gx) : whole(gy);
  shader::Recorder rec(d);
  const Status s = shader::encode_unary(rec, op, whole(gx), out, int64_t(x.size()), scale);
  EXPECT_TRUE(s.is_ok()) << s.message();
  const Status w = rec.submit_and_wait();
  EXPECT_TRUE(w.is_ok()) << w.message();
  return download_floats(d, in_place ? *gx : *gy, x.size());
}

TEST(VulkanActivation, UnaryMatchesTheCpuAtOddSizes) {
  MINFER_SKIP_WITHOUT_VULKAN();
  struct Case {
    UnaryOp op;
    float scale;
    const char* name;
  };
  for (const Case& c : {Case{UnaryOp::kScale, 0.37f, "scale"}, Case{UnaryOp::kScale, 1.0f, "copy"},
                        Case{UnaryOp::kSilu, 1.0f, "silu"}, Case{UnaryOp::kGelu, 1.0f, "gelu"}}) {
    for (int64_t n : kSizes) {
      // sigma 5: past gelu's +-10 cut-offs and deep into silu's tails.
      const auto x = random_floats(n, uint32_t(n) + 11, 5.0f);
      const Diff diff = compare(run_unary(c.op, x, c.scale, false), cpu_unary(c.op, x, c.scale));
      const std::string what = std::string(c.name) + " n " + std::to_string(n);
      if (c.op == UnaryOp::kScale) {
        EXPECT_EQ(diff.unequal, 0u) << what;
      } else {
        expect_close(diff, c.op == UnaryOp::kGelu, size_t(n), what);
      }
    }
  }
}

TEST(VulkanActivation, UnaryInPlaceOverwritesItsInput) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (UnaryOp op : {UnaryOp::kScale, UnaryOp::kSilu, UnaryOp::kGelu}) {
    const auto x = random_floats(4099, 21, 3.0f);
    const Diff diff = compare(run_unary(op, x, -2.5f, true), cpu_unary(op, x, -2.5f));
    expect_close(diff, op == UnaryOp::kGelu, x.size(), "in place");
  }
}

// Every finite f16 value of (-10, 10): the inputs at which the CPU's gelu
// table is exact, so the two differ only by the GPU's f32 tanh.
TEST(VulkanActivation, GeluOverEveryF16InputMatchesTheCpuTable) {
  MINFER_SKIP_WITHOUT_VULKAN();
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = quant::f16_to_f32(static_cast<uint16_t>(h));
    if (std::abs(v) < 10.0f) x.push_back(v);
  }
  const Diff diff =
      compare(run_unary(UnaryOp::kGelu, x, 1.0f, false), cpu_unary(UnaryOp::kGelu, x, 1.0f));
  EXPECT_EQ(diff.past_f16_ulp, 0u) << diff.first;
  EXPECT_LE(diff.unequal, x.size() / 1000) << "of " << x.size() << diff.first;
  std::printf("gelu over %zu f16 inputs: %zu differ from the CPU (max rel %.3g)\n", x.size(),
              diff.unequal, diff.max_rel);
}

// A grid past maxComputeWorkGroupCount[0] workgroups of 256 (folded over y).
TEST(VulkanActivation, ScalePastOneGridRowIsFolded) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const uint64_t x_max = device().info().limits.max_workgroup_count[0];
  if (x_max > 65535) GTEST_SKIP() << "grid row of " << x_max << " groups: too large to fill here";
  const int64_t n = int64_t(x_max) * 256 + 1000;
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 9973) - 4000.0f;
  const std::vector<float> y = run_unary(UnaryOp::kScale, x, 0.5f, false);
  EXPECT_EQ(compare(y, cpu_unary(UnaryOp::kScale, x, 0.5f)).unequal, 0u);
}

std::vector<float> run_glu(GluOp op, const std::vector<float>& gate, const std::vector<float>& up,
                           int out_is) {  // 0: its own buffer, 1: gate, 2: up
  shader::Device& d = device();
  auto gg = upload_floats(d, gate), gu = upload_floats(d, up);
  auto go = out_is == 0 ? zeros(d, gate.size() * 4) : nullptr;
  const shader::Buffer& out = out_is == 0 ? *go : out_is == 1 ? *gg : *gu;
  shader::Recorder rec(d);
  const Status s = shader::encode_glu(rec, op, whole(gg), whole(gu),
                                      shader::BufferRange{&out, 0, 0}, int64_t(gate.size()));
  EXPECT_TRUE(s.is_ok()) << s.message();
  const Status w = rec.submit_and_wait();
  EXPECT_TRUE(w.is_ok()) << w.message();
  return download_floats(d, out, gate.size());
}

TEST(VulkanActivation, GluMatchesTheCpuAtOddSizesAndInPlace) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (GluOp op : {GluOp::kSwiGLU, GluOp::kGeGLU}) {
    for (int64_t n : kSizes) {
      const auto gate = random_floats(n, uint32_t(n) + 31, 5.0f);
      const auto up = random_floats(n, uint32_t(n) + 32);
      const auto want = cpu_glu(op, gate, up);
      for (int out_is : {0, 1, 2}) {
        if (out_is != 0 && n != 4099) continue;  // in place at one size
        const Diff diff = compare(run_glu(op, gate, up, out_is), want);
        expect_close(diff, op == GluOp::kGeGLU, size_t(n),
                     std::string(op == GluOp::kSwiGLU ? "swiglu" : "geglu") + " n " +
                         std::to_string(n) + " out " + std::to_string(out_is));
      }
    }
  }
}

std::vector<float> run_swiglu_oai(const std::vector<float>& gate, const std::vector<float>& up,
                                  int out_is) {  // 0: its own buffer, 1: gate, 2: up
  shader::Device& d = device();
  auto gg = upload_floats(d, gate), gu = upload_floats(d, up);
  auto go = out_is == 0 ? zeros(d, gate.size() * 4) : nullptr;
  const shader::Buffer& out = out_is == 0 ? *go : out_is == 1 ? *gg : *gu;
  shader::Recorder rec(d);
  const Status s =
      shader::encode_swiglu_oai(rec, whole(gg), whole(gu), shader::BufferRange{&out, 0, 0},
                                int64_t(gate.size()), 1.702f, 7.0f);
  EXPECT_TRUE(s.is_ok()) << s.message();
  const Status w = rec.submit_and_wait();
  EXPECT_TRUE(w.is_ok()) << w.message();
  return download_floats(d, out, gate.size());
}

// The GPU's swiglu_oai against the CPU's: NaN exactly where the CPU has NaN,
// else within 1e-5 relative (the two exps differ by an ulp or two).
void expect_swiglu_oai_close(const std::vector<float>& gate, const std::vector<float>& up,
                             const std::vector<float>& got, const std::string& what) {
  std::vector<float> want(gate.size());
  cpu::swiglu_oai(gate.data(), up.data(), int64_t(gate.size()), 1.702f, 7.0f, want.data());
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : (got[i] == want[i] ||
                           std::abs(double(got[i]) - want[i]) <= 1e-5 * std::abs(double(want[i])));
    if (!ok && ++bad <= 8) {
      ADD_FAILURE() << what << ": gate " << gate[i] << " up " << up[i] << ": " << got[i]
                    << " vs the CPU's " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST(VulkanActivation, SwigluOaiMatchesTheCpuAtOddSizesAndInPlace) {
  MINFER_SKIP_WITHOUT_VULKAN();
  for (int64_t n : kSizes) {
    // Spread 6 around 0: many past the limit of 7 on either side.
    const auto gate = random_floats(n, uint32_t(n) + 41, 6.0f);
    const auto up = random_floats(n, uint32_t(n) + 42, 6.0f);
    for (int out_is : {0, 1, 2}) {
      if (out_is != 0 && n != 4099) continue;  // in place at one size
      expect_swiglu_oai_close(gate, up, run_swiglu_oai(gate, up, out_is),
                              "n " + std::to_string(n) + " out " + std::to_string(out_is));
    }
  }
}

// At and around the limit, large and infinite values, signed zeros and NaN
// in either input, each against every other.
TEST(VulkanActivation, SwigluOaiAtTheLimitsLargeAndNaN) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const float below = std::nextafter(7.0f, 0.0f), above = std::nextafter(7.0f, 8.0f);
  const std::vector<float> values = {0.0f,   -0.0f,  1.0f,   -1.0f,  7.0f,   -7.0f, below,
                                     -below, above,  -above, 6.5f,   -6.5f,  30.0f, -30.0f,
                                     -52.0f, -60.0f, 1e30f,  -1e30f, kInf,   -kInf, kNaN,
                                     0.5f,   -0.5f,  88.0f,  -88.0f, 1e-30f, 3.0f,  -3.0f};
  std::vector<float> gate, up;
  for (float g : values) {
    for (float u : values) {
      gate.push_back(g);
      up.push_back(u);
    }
  }
  expect_swiglu_oai_close(gate, up, run_swiglu_oai(gate, up, 0), "special values");
  // NaN in: NaN out, whichever input holds it.
  const auto got = run_swiglu_oai({kNaN, 1.0f, kNaN}, {1.0f, kNaN, kNaN}, 0);
  for (float v : got) EXPECT_TRUE(std::isnan(v)) << v;
}

TEST(VulkanActivation, SwigluOaiRefusesNonFiniteConstants) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto a = zeros(d, 64);
  shader::Recorder rec(d);
  EXPECT_EQ(shader::encode_swiglu_oai(rec, whole(a), whole(a), whole(a), 16, 1.702f, kInf).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shader::encode_swiglu_oai(rec, whole(a), whole(a), whole(a), 16, kNaN, 7.0f).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shader::encode_swiglu_oai(rec, whole(a), whole(a), whole(a), 17, 1.702f, 7.0f).code(),
            StatusCode::kInvalidArgument);  // 17 floats past a 64-byte binding
  EXPECT_EQ(rec.pending(), 0u);
}

// CpuBackend::run_argmax's loop.
std::vector<int32_t> cpu_argmax(const std::vector<float>& x, int64_t rows, int64_t len) {
  std::vector<int32_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    float best = -kInf;
    int32_t id = -1;
    for (int64_t i = 0; i < len; ++i) {
      if (x[r * len + i] > best) {
        best = x[r * len + i];
        id = static_cast<int32_t>(i);
      }
    }
    out[r] = id;
  }
  return out;
}

std::vector<int32_t> run_argmax(const std::vector<float>& x, int64_t rows, int64_t len) {
  shader::Device& d = device();
  auto gx = upload_floats(d, x);
  auto go = zeros(d, uint64_t(rows) * 4);
  shader::Recorder rec(d);
  const Status s = shader::encode_argmax(rec, whole(gx), whole(go), rows, len);
  EXPECT_TRUE(s.is_ok()) << s.message();
  const Status w = rec.submit_and_wait();
  EXPECT_TRUE(w.is_ok()) << w.message();
  return download_vector<int32_t>(d, *go, size_t(rows));
}

TEST(VulkanActivation, ArgmaxTiesNanAndMinusInfRows) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t len = 4099;
  std::vector<std::vector<float>> rows;
  auto row = [&](uint32_t seed) { return random_floats(len, seed); };
  rows.push_back(row(1));  // plain
  rows.push_back(row(2));  // ties across invocations
  for (int64_t i : {3000, 100, 5, 4098}) rows.back()[i] = 50.0f;
  rows.push_back(row(3));  // ties in one invocation, lanes
  for (int64_t i : {7 + 256, 7 + 512, 8, 7 + 257}) rows.back()[i] = 50.0f;
  rows.push_back(row(4));  // NaN everywhere around the max
  for (int64_t i = 0; i < len; i += 3) rows.back()[i] = kNaN;
  rows.back()[10] = 60.0f;
  rows.push_back(std::vector<float>(len, -kInf));  // all -inf: -1
  rows.push_back(std::vector<float>(len, kNaN));   // all NaN: -1
  rows.push_back(std::vector<float>(len, -kInf));  // -inf and NaN: -1
  for (int64_t i = 1; i < len; i += 2) rows.back()[i] = kNaN;
  rows.push_back(std::vector<float>(len, -kInf));  // one finite element
  rows.back()[4097] = -1e30f;
  rows.push_back(std::vector<float>(len, 0.0f));  // -0 and +0 tie: the first
  rows.back()[0] = -0.0f;
  rows.push_back(std::vector<float>(len, -1.0f));  // +inf wins once
  rows.back()[2049] = kInf;
  rows.back()[2050] = kInf;
  std::vector<float> x;
  for (const auto& r : rows) x.insert(x.end(), r.begin(), r.end());
  const auto n_rows = static_cast<int64_t>(rows.size());
  const auto want = cpu_argmax(x, n_rows, len);
  EXPECT_EQ(want[1], 5);
  EXPECT_EQ(want[2], 8);
  EXPECT_EQ(want[4], -1);
  EXPECT_EQ(want[9], 2049);
  EXPECT_EQ(run_argmax(x, n_rows, len), want);
}

TEST(VulkanActivation, ArgmaxOddLengthsVocabularyRowsAndFoldedRows) {
  MINFER_SKIP_WITHOUT_VULKAN();
  struct Case {
    int64_t rows, len;
  };
  for (const Case& c : {Case{1, 1}, Case{3, 7}, Case{5, 4099}, Case{3, 262144}, Case{70001, 3}}) {
    auto x = random_floats(c.rows * c.len, uint32_t(c.len) + 41);
    if (c.len == 262144) {  // Gemma's vocabulary: ties far apart, the first wins
      for (int64_t i : {200000, 131073, 262143}) x[i] = 9.0f;
      for (int64_t i : {262143, 1}) x[c.len + i] = 9.0f;
      x[2 * c.len + 262143] = 9.0f;
    }
    const auto want = cpu_argmax(x, c.rows, c.len);
    if (c.len == 262144) EXPECT_EQ(want[0], 131073);
    EXPECT_EQ(run_argmax(x, c.rows, c.len), want) << c.rows << " x " << c.len;
  }
}

struct Gathered {
  std::vector<float> out;
  std::vector<uint32_t> err;
};

// Gathers into a buffer prefilled with `fill` (or in place, out == x).
Gathered run_gather(const std::vector<float>& x, const std::vector<int32_t>& ids, int64_t row_len,
                    float scale, bool in_place, float fill = 7.0f) {
  shader::Device& d = device();
  auto gx = upload_floats(d, x);
  auto gi = upload_vector(d, ids);
  const size_t n_out = ids.size() * size_t(row_len);
  auto go = in_place ? nullptr : upload_floats(d, std::vector<float>(n_out, fill));
  auto ge = zeros(d, MINFER_ERR_WORDS * 4);
  const shader::Buffer& out = in_place ? *gx : *go;
  shader::Recorder rec(d);
  const Status s = shader::encode_gather_rows(
      rec, whole(gx), whole(gi), shader::BufferRange{&out, 0, 0}, whole(ge),
      int64_t(x.size()) / row_len, row_len, int64_t(ids.size()), scale);
  EXPECT_TRUE(s.is_ok()) << s.message();
  const Status w = rec.submit_and_wait();
  EXPECT_TRUE(w.is_ok()) << w.message();
  return {download_floats(d, out, in_place ? x.size() : n_out),
          download_vector<uint32_t>(d, *ge, MINFER_ERR_WORDS)};
}

// The CPU's in-order memmove loop (CpuBackend::run_get_rows) with a scale;
// rows with a bad id are left alone.
std::vector<float> host_gather(std::vector<float> x, const std::vector<int32_t>& ids,
                               int64_t row_len, float scale, bool in_place, float fill = 7.0f) {
  const auto n_src = static_cast<int64_t>(x.size()) / row_len;
  std::vector<float> out(ids.size() * size_t(row_len), fill);
  std::vector<float>& dst = in_place ? x : out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_src) continue;
    std::memmove(&dst[i * row_len], &x[size_t(ids[i]) * row_len], size_t(row_len) * 4);
    for (int64_t c = 0; c < row_len; ++c) dst[i * row_len + c] *= scale;
  }
  return dst;
}

TEST(VulkanActivation, GatherRowsWithScaleAtOddSizes) {
  MINFER_SKIP_WITHOUT_VULKAN();
  struct Case {
    int64_t n_src, row_len, n_out;
    float scale;
  };
  for (const Case& c : {Case{1, 1, 1, 1.0f}, Case{9, 7, 13, 0.5f}, Case{37, 4099, 11, 1.0f},
                        Case{300, 3500, 301, -3.0f}}) {
    const auto x = random_floats(c.n_src * c.row_len, uint32_t(c.row_len) + 51);
    std::vector<int32_t> ids(static_cast<size_t>(c.n_out));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7 + 3) % size_t(c.n_src));
    const Gathered g = run_gather(x, ids, c.row_len, c.scale, false);
    EXPECT_EQ(g.out, host_gather(x, ids, c.row_len, c.scale, false))
        << c.n_src << " x " << c.row_len << " -> " << c.n_out;
    EXPECT_EQ(g.err, std::vector<uint32_t>(MINFER_ERR_WORDS, 0u));
  }
}

TEST(VulkanActivation, GatherRowsReportsABadIdAndSkipsItsRow) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t n_src = 20, row_len = 515;
  const auto x = random_floats(n_src * row_len, 61);
  for (int32_t bad : {-3, 20, 1 << 30}) {
    const std::vector<int32_t> ids = {4, 19, bad, 0, 4};
    const Gathered g = run_gather(x, ids, row_len, 2.0f, false);
    EXPECT_EQ(g.out, host_gather(x, ids, row_len, 2.0f, false)) << "bad id " << bad;
    EXPECT_EQ(g.err[0], MINFER_ERR_ROW_ID);
    EXPECT_EQ(g.err[1], static_cast<uint32_t>(bad));
    EXPECT_EQ(g.err[2], uint32_t(n_src));
  }
  // Two bad ids: one of them is reported (the first to arrive), both rows skipped.
  const std::vector<int32_t> ids = {-1, 3, 25};
  const Gathered g = run_gather(x, ids, row_len, 1.0f, false);
  EXPECT_EQ(g.out, host_gather(x, ids, row_len, 1.0f, false));
  EXPECT_EQ(g.err[0], MINFER_ERR_ROW_ID);
  EXPECT_TRUE(g.err[1] == 0xffffffffu || g.err[1] == 25u) << g.err[1];
}

TEST(VulkanActivation, GatherRowsInPlaceIsTheCpusInOrderMemmove) {
  MINFER_SKIP_WITHOUT_VULKAN();
  const int64_t n_src = 50, row_len = 1031;
  const auto x = random_floats(n_src * row_len, 71);
  const std::vector<std::vector<int32_t>> cases = {
      {0, 2, 3, 3, 10, 11, 12, 40, 49},  // ascending, ids[i] >= i: the input rows
      {49},                              // the last token's row
      {5, 0, 1, 7, 2},                   // ids[i] < i: rows already written, as the CPU
      {3, 60, 4}};                       // a bad id: reported, its row left alone
  for (const auto& ids : cases) {
    for (float scale : {1.0f, 0.25f}) {
      const Gathered g = run_gather(x, ids, row_len, scale, true);
      EXPECT_EQ(g.out, host_gather(x, ids, row_len, scale, true)) << "ids[0] " << ids[0];
      const bool bad = std::any_of(ids.begin(), ids.end(), [](int32_t id) { return id >= 50; });
      EXPECT_EQ(g.err[0], bad ? MINFER_ERR_ROW_ID : 0u);
      if (bad) EXPECT_EQ(g.err[1], 60u);
    }
  }
}

void expect_refused(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}
#define EXPECT_REFUSED(call, needle) \
  do {                               \
    SCOPED_TRACE(#call);             \
    expect_refused(call, needle);    \
  } while (0)

TEST(VulkanActivation, MalformedCallsAreRefusedBeforeEncoding) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto a = zeros(d, 64 * 4), b = zeros(d, 64 * 4), small = zeros(d, 16);
  auto ids = zeros(d, 64 * 4), err = zeros(d, MINFER_ERR_WORDS * 4);
  const shader::BufferRange none{};
  shader::Recorder rec(d);
  EXPECT_REFUSED(shader::encode_unary(rec, UnaryOp::kSilu, whole(a), whole(b), 0, 1.0f), "n = 0");
  EXPECT_REFUSED(shader::encode_unary(rec, UnaryOp::kGelu, whole(a), whole(b), -5, 1.0f), "n = -5");
  EXPECT_REFUSED(shader::encode_unary(rec, UnaryOp::kScale, whole(a), whole(small), 64, 1.0f),
                 "out needs 256 bytes, its binding has 16");
  EXPECT_REFUSED(shader::encode_unary(rec, UnaryOp::kScale, shader::BufferRange{a.get(), 0, 100},
                                      whole(b), 64, 1.0f),
                 "x needs 256 bytes, its binding has 100");
  EXPECT_REFUSED(shader::encode_unary(rec, UnaryOp::kScale, none, whole(b), 64, 1.0f), "no buffer");
  EXPECT_REFUSED(shader::encode_glu(rec, GluOp::kSwiGLU, whole(a), whole(small), whole(b), 64),
                 "up needs 256");
  EXPECT_REFUSED(shader::encode_glu(rec, GluOp::kGeGLU, whole(a), whole(b), whole(b), 0), "n = 0");
  EXPECT_REFUSED(shader::encode_argmax(rec, whole(a), whole(b), 2, 0), "row_len = 0");
  EXPECT_REFUSED(shader::encode_argmax(rec, whole(a), whole(b), 0, 8), "n_rows = 0");
  EXPECT_REFUSED(shader::encode_argmax(rec, whole(a), whole(b), 2, 33), "x needs 264");
  EXPECT_REFUSED(shader::encode_argmax(rec, whole(a), whole(small), 8, 8), "out needs 32");
  EXPECT_REFUSED(shader::encode_argmax(rec, whole(a), whole(b), int64_t{1} << 20, int64_t{1} << 20),
                 "exceed 32-bit indices");
  EXPECT_EQ(rec.pending(), 0u);
}

TEST(VulkanActivation, MalformedGathersAreRefused) {
  MINFER_SKIP_WITHOUT_VULKAN();
  shader::Device& d = device();
  auto x = zeros(d, 64 * 4), out = zeros(d, 64 * 4), ids = zeros(d, 64 * 4);
  auto err = zeros(d, MINFER_ERR_WORDS * 4), small = zeros(d, 8);
  shader::Recorder rec(d);
  auto gather = [&](shader::BufferRange xr, shader::BufferRange ir, shader::BufferRange orr,
                    shader::BufferRange er, int64_t n_src, int64_t row_len, int64_t n_out) {
    return shader::encode_gather_rows(rec, xr, ir, orr, er, n_src, row_len, n_out, 1.0f);
  };
  const auto X = whole(x), I = whole(ids), O = whole(out), E = whole(err);
  EXPECT_REFUSED(gather(X, I, O, E, 0, 8, 8), "n_src = 0");
  EXPECT_REFUSED(gather(X, I, O, E, 8, -1, 8), "row_len = -1");
  EXPECT_REFUSED(gather(X, I, O, E, 8, 8, 0), "n_out = 0");
  EXPECT_REFUSED(gather(X, I, O, E, 9, 8, 8), "x needs 288");
  EXPECT_REFUSED(gather(X, I, O, E, 8, 8, 9), "out needs 288");
  EXPECT_REFUSED(gather(X, whole(small), O, E, 8, 8, 8), "ids needs 32");
  EXPECT_REFUSED(gather(X, I, O, shader::BufferRange{small.get(), 0, 8}, 8, 8, 8),
                 "err needs 16 bytes, its binding has 8");
  EXPECT_REFUSED(gather(X, I, shader::BufferRange{x.get(), 64, 0}, E, 4, 8, 4), "out overlaps x");
  EXPECT_REFUSED(gather(X, I, shader::BufferRange{ids.get(), 8, 0}, E, 8, 4, 4),
                 "out overlaps ids");
  EXPECT_REFUSED(gather(X, I, O, shader::BufferRange{out.get(), 0, 0}, 8, 8, 8), "error words");
  auto big = zeros(d, (shader::kMaxInPlaceGatherRows + 1) * 4);
  auto big_ids = zeros(d, (shader::kMaxInPlaceGatherRows + 1) * 4);
  EXPECT_REFUSED(
      gather(whole(big), whole(big_ids), whole(big), E, 1, 1, shader::kMaxInPlaceGatherRows + 1),
      "in place");
  EXPECT_EQ(rec.pending(), 0u);
}

}  // namespace
}  // namespace minfer::vulkan::testing

#endif  // MINFER_HAS_VULKAN
