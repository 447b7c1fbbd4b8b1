// gpt-oss's clamped GLU on the CPU (swiglu_oai in backend/cpu/ops.h and the
// kSwiGLUOai node) against the formula of docs/GPT_OSS.md "swiglu_oai"
// evaluated in double: x = min(gate, limit), y = clamp(up, -limit, limit),
// out = x / (1 + exp(alpha * -x)) * (y + 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "graph/ir.h"
#include "model/weights.h"

namespace minfer::cpu {
namespace {

using testing::random_floats;

constexpr float kAlpha = 1.702f;
constexpr float kLimit = 7.0f;

// The formula in double over the kernel's float inputs and constants; a NaN
// input gives NaN (the comparisons below let it through).
double reference(float gate, float up, float alpha, float limit) {
  const double g = gate, u = up, lim = limit;
  const double x = g > lim ? lim : g;
  const double y = u < -lim ? -lim : (u > lim ? lim : u);
  return x / (1.0 + std::exp(double(alpha) * -x)) * (y + 1.0);
}

// The values around which the formula changes: the limits and their float
// neighbours, zero, up = -1 (y + 1 = 0), large and infinite inputs, and gates
// past -52 whose exp overflows f32 (the float result is then -0).
std::vector<float> edge_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,   -0.0f, 1.0f,  -1.0f, 0.5f,   -0.5f, 3.0f,   -3.0f,  60.0f,
                          -60.0f, 1e3f,  -1e3f, 1e30f, -1e30f, inf,   1e-30f, -1e-30f};
  for (float l : {kLimit, -kLimit}) {
    v.push_back(l);
    v.push_back(std::nextafter(l, inf));
    v.push_back(std::nextafter(l, -inf));
    v.push_back(l + 0.25f);
    v.push_back(l - 0.25f);
  }
  return v;
}

// The float evaluation's error: rounding alpha * -x before expf moves the
// exponential by up to |alpha x| 2^-24 relative, and expf, the add, the
// division and the two multiplies a few half-ulps more; so relative to
// |reference|, (|alpha x| + 8) 2^-24, with x the clamped gate. Where
// exp(alpha * -x) is near or past f32's range (gates below about -52), expf
// may overflow to inf and the float result is then exactly 0 (the
// reference's is below 1e-35).
bool close(float got, double want, float gate, float alpha, float limit) {
  if (std::isnan(want)) return std::isnan(got);
  const double x = std::min(double(gate), double(limit));
  const double rel = (std::fabs(double(alpha) * x) + 8.0) * 0x1p-24;
  const bool may_overflow = std::exp(double(alpha) * -x) >= 0.5 * double(FLT_MAX);
  if (may_overflow && got == 0.0f) return true;
  return std::fabs(double(got) - want) <= rel * std::fabs(want);
}

void check_all(const std::vector<float>& gate, const std::vector<float>& up, float alpha,
               float limit) {
  std::vector<float> out(gate.size(), 12345.0f);
  swiglu_oai(gate.data(), up.data(), static_cast<int64_t>(gate.size()), alpha, limit, out.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double want = reference(gate[i], up[i], alpha, limit);
    EXPECT_TRUE(close(out[i], want, gate[i], alpha, limit))
        << "gate " << gate[i] << " up " << up[i] << ": " << out[i] << " vs " << want;
  }
}

TEST(cpu_SwiGluOai, MatchesDoubleFormulaAtTheEdges) {
  const std::vector<float> e = edge_values();
  std::vector<float> gate, up;
  for (float g : e) {
    for (float u : e) {
      gate.push_back(g);
      up.push_back(u);
    }
  }
  check_all(gate, up, kAlpha, kLimit);
}

TEST(cpu_SwiGluOai, MatchesDoubleFormulaOnRandomInputs) {
  // Spread 6 puts many inputs beyond the limits on both sides.
  check_all(random_floats(4096, 1, 6.0f), random_floats(4096, 2, 6.0f), kAlpha, kLimit);
  // Gates from -60 (past where expf overflows) to 10, every 0.1.
  std::vector<float> ramp;
  for (int i = -600; i <= 100; ++i) ramp.push_back(0.1f * static_cast<float>(i));
  check_all(ramp, random_floats(static_cast<int64_t>(ramp.size()), 9, 6.0f), kAlpha, kLimit);
  // The constants come from the arguments, not from the defaults.
  check_all(random_floats(512, 3, 4.0f), random_floats(512, 4, 4.0f), 1.0f, 2.5f);
}

// At and past the limits the clamped values are used exactly.
TEST(cpu_SwiGluOai, ClampsAtTheLimits) {
  const std::vector<float> gate = {7.0f, 8.0f, 1e30f, 7.0f, 2.0f, 2.0f, 2.0f, 2.0f};
  const std::vector<float> up = {0.0f, 0.0f, 0.0f, 7.0f, 100.0f, 7.0f, -100.0f, -7.0f};
  std::vector<float> out(gate.size());
  swiglu_oai(gate.data(), up.data(), static_cast<int64_t>(gate.size()), kAlpha, kLimit, out.data());
  EXPECT_EQ(out[0], out[1]);  // gate clamped above to 7
  EXPECT_EQ(out[0], out[2]);
  EXPECT_EQ(out[3], out[0] * 8.0f);  // y + 1 = 8 (a power of two: exact)
  EXPECT_EQ(out[4], out[5]);         // up clamped above to 7
  EXPECT_EQ(out[6], out[7]);         // up clamped below to -7
  EXPECT_GT(out[5], 0.0f);
  EXPECT_LT(out[7], 0.0f);
  // Negative gates are not clamped below: the sigmoid takes them to zero.
  const float g = -7.5f, u = 0.0f;
  float o = 0.0f;
  swiglu_oai(&g, &u, 1, kAlpha, kLimit, &o);
  EXPECT_TRUE(close(o, reference(g, u, kAlpha, kLimit), g, kAlpha, kLimit));
  EXPECT_LT(o, -1e-6f);
}

// A NaN in gate or up gives NaN (ggml's std::min and std::clamp return their
// first argument, the NaN, where fminf/fmaxf would return the limit).
TEST(cpu_SwiGluOai, NanInGivesNanOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> gate = {nan, 1.0f, nan, 100.0f, -100.0f};
  const std::vector<float> up = {1.0f, nan, nan, nan, nan};
  std::vector<float> out(gate.size(), 0.0f);
  swiglu_oai(gate.data(), up.data(), static_cast<int64_t>(gate.size()), kAlpha, kLimit, out.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
}

// out may alias gate or up; an element's result never depends on the others.
TEST(cpu_SwiGluOai, InPlaceAndRangeInvariant) {
  const auto gate = random_floats(300, 5, 5.0f);
  const auto up = random_floats(300, 6, 5.0f);
  std::vector<float> out(300);
  swiglu_oai(gate.data(), up.data(), 300, kAlpha, kLimit, out.data());
  std::vector<float> a = gate, b = up, parts(300);
  swiglu_oai(a.data(), up.data(), 300, kAlpha, kLimit, a.data());
  swiglu_oai(gate.data(), b.data(), 300, kAlpha, kLimit, b.data());
  swiglu_oai(gate.data(), up.data(), 17, kAlpha, kLimit, parts.data());
  swiglu_oai(gate.data() + 17, up.data() + 17, 283, kAlpha, kLimit, parts.data() + 17);
  EXPECT_EQ(a, out);
  EXPECT_EQ(b, out);
  EXPECT_EQ(parts, out);
}

graph::Node glu_node(int64_t n, float alpha, float limit) {
  graph::Node node;
  node.op = graph::Op::kSwiGLUOai;
  node.shape.ne = {n, 1};
  node.inputs = {0, 1};
  node.meta = graph::GluMeta{alpha, limit};
  node.name = "blk.0.ffn_act";
  return node;
}

backend::BufferId upload(CpuBackend& cpu, const std::vector<float>& x) {
  const size_t bytes = x.size() * sizeof(float);
  Result<backend::BufferId> id = cpu.alloc_buffer(bytes);
  EXPECT_TRUE(id.is_ok());
  EXPECT_TRUE(cpu.write_host(*id, 0, std::as_bytes(std::span(x))).is_ok());
  return *id;
}

TEST(cpu_SwiGluOai, BackendSupportsOnlyWellFormedNodes) {
  model::Weights w;
  CpuBackend cpu(w, 1);
  EXPECT_TRUE(cpu.supports_op(glu_node(8, kAlpha, kLimit)));
  graph::Node no_meta = glu_node(8, kAlpha, kLimit);
  no_meta.meta = std::monostate{};
  EXPECT_FALSE(cpu.supports_op(no_meta));
  graph::Node one_input = glu_node(8, kAlpha, kLimit);
  one_input.inputs = {0};
  EXPECT_FALSE(cpu.supports_op(one_input));
  graph::Node f16 = glu_node(8, kAlpha, kLimit);
  f16.dtype = graph::DType::kF16;
  EXPECT_FALSE(cpu.supports_op(f16));
}

// The node runs the kernel with its GluMeta's constants; inputs smaller than
// the output are an error naming the node.
TEST(cpu_SwiGluOai, BackendRunsTheNode) {
  model::Weights w;
  CpuBackend cpu(w, 1);
  const int64_t n = 1000;
  const auto gate = random_floats(n, 7, 6.0f);
  const auto up = random_floats(n, 8, 6.0f);
  const graph::Node node = glu_node(n, 1.5f, 5.0f);
  const backend::BufferId g = upload(cpu, gate), u = upload(cpu, up);
  Result<backend::BufferId> out = cpu.alloc_buffer(node.bytes());
  ASSERT_TRUE(out.is_ok());
  const std::vector<backend::BufferId> inputs = {g, u};
  const Status s = cpu.execute_node(node, inputs, *out, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  std::vector<float> got(n), want(n);
  ASSERT_TRUE(cpu.read_host(*out, 0, std::as_writable_bytes(std::span(got))).is_ok());
  swiglu_oai(gate.data(), up.data(), n, 1.5f, 5.0f, want.data());
  EXPECT_EQ(got, want);
  const backend::BufferId small = upload(cpu, std::vector<float>(n - 1));
  const std::vector<backend::BufferId> short_inputs = {g, small};
  const Status e = cpu.execute_node(node, short_inputs, *out, nullptr);
  EXPECT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("blk.0.ffn_act"), std::string::npos) << e.message();
}

}  // namespace
}  // namespace minfer::cpu
