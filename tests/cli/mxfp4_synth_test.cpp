// `minfer synth -q MXFP4` end to end: the file holds MXFP4 FFN matrices and
// Q8_0 for the other matrices (read back by the gguf Python package), runs on
// the CPU backend, and its perplexity is finite and close to that of the same
// model (same seed) written in F16.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cli/cli_testutil.h"

namespace minfer::cli {
namespace {

class Mxfp4SynthTest : public CliTest {
 protected:
  // The final perplexity estimate of `model` over the test text, or NaN.
  static double perplexity(const std::string& model) {
    const std::string text = std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt";
    const Outcome r = minfer("perplexity -m " + q(model) + " -f " + q(text) + " -c 64 --chunks 3");
    EXPECT_EQ(r.code, 0) << r.err;
    const std::string key = "\nFinal estimate: PPL = ";
    const size_t at = r.out.find(key);
    if (r.code != 0 || at == std::string::npos) return NAN;
    return std::stod(r.out.substr(at + key.size()));
  }
};

TEST_F(Mxfp4SynthTest, PerplexityIsFiniteAndCloseToF16) {
  const std::string mx = path("mx.gguf").string();
  const std::string f16 = path("f16.gguf").string();
  for (const auto& [type, out] : {std::pair{"MXFP4", mx}, std::pair{"F16", f16}}) {
    const Outcome s =
        minfer(std::string("synth --model tiny-qwen2 -s --seed 3 -q ") + type + " -o " + q(out));
    ASSERT_EQ(s.code, 0) << s.err;
  }
  // The tensor types, as an independent reader sees them.
  const Outcome types = minfer_shell(
      "python3 -c \"import sys; from gguf import GGUFReader; "
      "[print(t.name, t.tensor_type.name) for t in GGUFReader(sys.argv[1]).tensors]\" " +
      q(mx));
  ASSERT_EQ(types.code, 0) << types.err << "(run tools/install_deps.sh for the gguf package)";
  for (const char* line :
       {"blk.0.ffn_gate.weight MXFP4", "blk.0.ffn_up.weight MXFP4", "blk.0.ffn_down.weight MXFP4",
        "blk.0.attn_q.weight Q8_0", "blk.0.attn_output.weight Q8_0", "token_embd.weight Q8_0",
        "blk.0.attn_norm.weight F32"}) {
    EXPECT_NE(types.out.find(std::string(line) + "\n"), std::string::npos) << line << "\n"
                                                                           << types.out;
  }
  const double ppl_mx = perplexity(mx);
  const double ppl_f16 = perplexity(f16);
  ASSERT_TRUE(std::isfinite(ppl_mx));
  ASSERT_TRUE(std::isfinite(ppl_f16));
  EXPECT_GT(ppl_mx, 1.0);
  // MXFP4 FFN weights (about 11% RMS error each) move a random model's
  // perplexity by a few percent at most (measured: docs/QUANT.md).
  EXPECT_NEAR(std::log(ppl_mx), std::log(ppl_f16), 0.05) << ppl_mx << " vs " << ppl_f16;
}

}  // namespace
}  // namespace minfer::cli
