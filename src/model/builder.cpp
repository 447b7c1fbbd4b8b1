#include "model/builder.h"

#include "model/builders/layers.h"

namespace minfer::model {

Result<graph::Graph> build_graph(const HParams& hp, const Weights& weights,
                                 const GraphParams& params) {
  if (params.n_tokens < 1) {
    return Status::invalid_argument("graph needs at least one token, got " +
                                    std::to_string(params.n_tokens));
  }
  if (params.n_outputs < 1 || params.n_outputs > params.n_tokens) {
    return Status::invalid_argument("outputs " + std::to_string(params.n_outputs) + " not in [1, " +
                                    std::to_string(params.n_tokens) + "]");
  }
  using Builder = Result<graph::Graph> (*)(const HParams&, const Weights&, const GraphParams&);
  struct Entry {
    Arch arch;
    Builder build;
  };
  static constexpr Entry kBuilders[] = {
      {Arch::kQwen2, builders::build_qwen2},       {Arch::kQwen3, builders::build_qwen3},
      {Arch::kQwen3Moe, builders::build_qwen3moe}, {Arch::kLlama, builders::build_llama},
      {Arch::kGemma3, builders::build_gemma3},     {Arch::kGptOss, builders::build_gpt_oss},
  };
  for (const auto& e : kBuilders) {
    if (e.arch == hp.arch) return e.build(hp, weights, params);
  }
  return Status::unimplemented("no graph builder for architecture '" + hp.arch_name + "'");
}

}  // namespace minfer::model
