#include "cli/speculative_options.h"

#include <cstdio>
#include <string>

#include "cli/common.h"
#include "runtime/draft_model.h"
#include "runtime/ngram_draft.h"

namespace minfer::cli {

void add_speculative_options(ArgParser& p) {
  const runtime::NgramSizes sizes;
  p.option("--spec,--spec-type", "TYPE",
           "speculative decoding: none, ngram (prompt lookup) or draft (with -md) (none)");
  p.option("-md,--model-draft,--spec-draft-model", "FILE",
           "draft model for speculative decoding (same vocabulary)");
  p.option("--draft-max,--draft-n", "N",
           "tokens to draft per step at most (" +
               std::to_string(runtime::SpeculativeParams::kDefaultDraftMax) + ")");
  p.option("--draft-min", "N", "drop drafts shorter than N (0)");
  p.option("--draft-p-min", "P", "draft model: stop at a token less likely than P (0.75)");
  p.option("--spec-ngram-min", "N",
           "prompt lookup: shortest suffix to match (" + std::to_string(sizes.ngram_min) + ")");
  p.option("--spec-ngram-max", "N",
           "prompt lookup: longest suffix to match (" + std::to_string(sizes.ngram_max) + ")");
}

namespace {

Result<std::shared_ptr<runtime::Drafter>> draft_model_drafter(const ArgParser& p,
                                                              const model::Model& target,
                                                              const runtime::RunOptions& run,
                                                              bool quiet) {
  const std::string path = *p.get("--model-draft");
  if (!quiet) std::fprintf(stderr, "draft ");
  auto m = model::Model::load(path);
  if (!m) return m.status().with_context("draft model '" + path + "'");
  if (!quiet) std::fprintf(stderr, "model: %s\n", (*m)->describe().c_str());
  auto d = runtime::DraftModelDrafter::create(target, std::move(*m), run);
  if (!d) return d.status().with_context("draft model '" + path + "'");
  return std::shared_ptr<runtime::Drafter>(std::move(*d));
}

// "none", "ngram" or "draft", checked against -md.
Result<std::string> spec_type(const ArgParser& p) {
  const std::string type = p.get_or("--spec", p.has("--model-draft") ? "draft" : "none");
  if (type != "none" && type != "ngram" && type != "draft") {
    return Status::invalid_argument(p.spelled("--spec") + ": unknown type (none, ngram, draft)");
  }
  if (type == "draft" && !p.has("--model-draft")) {
    return Status::invalid_argument("--spec draft needs a draft model (-md FILE)");
  }
  if (type != "draft" && p.has("--model-draft")) {
    return Status::invalid_argument(p.spelled("--spec") + " and -md: give one way to draft");
  }
  return type;
}

}  // namespace

Result<runtime::SpeculativeParams> speculative_params(const ArgParser& p) {
  runtime::SpeculativeParams s;
  MINFER_ASSIGN_OR_RETURN(const std::string type, spec_type(p));
  if (type == "none") return s;
  MINFER_ASSIGN_OR_RETURN(int64_t n_max,
                          p.get_int("--draft-max", runtime::SpeculativeParams::kDefaultDraftMax, 0,
                                    runtime::kMostDrafted));
  MINFER_ASSIGN_OR_RETURN(int64_t n_min, p.get_int("--draft-min", 0, 0, runtime::kMostDrafted));
  MINFER_ASSIGN_OR_RETURN(double p_min, p.get_double("--draft-p-min", 0.75, 0.0, 1.0));
  s.n_max = static_cast<int>(n_max);
  s.n_min = static_cast<int>(n_min);
  s.p_min = static_cast<float>(p_min);
  return s;
}

Result<Speculation> speculation(const ArgParser& p, const model::Model& target,
                                const runtime::RunOptions& run, bool quiet) {
  Speculation s;
  MINFER_ASSIGN_OR_RETURN(const std::string type, spec_type(p));
  if (type == "none") return s;
  MINFER_ASSIGN_OR_RETURN(s.params, speculative_params(p));
  if (type == "ngram") {
    runtime::NgramSizes sizes;
    MINFER_ASSIGN_OR_RETURN(int64_t lo, p.get_int("--spec-ngram-min", sizes.ngram_min, 1,
                                                  runtime::NgramSizes::kLongest));
    MINFER_ASSIGN_OR_RETURN(int64_t hi, p.get_int("--spec-ngram-max", sizes.ngram_max, 1,
                                                  runtime::NgramSizes::kLongest));
    sizes = {static_cast<int>(lo), static_cast<int>(hi)};
    MINFER_RETURN_IF_ERROR(runtime::NgramDrafter::check(sizes));
    s.drafter = std::make_shared<runtime::NgramDrafter>(sizes);
    return s;
  }
  MINFER_ASSIGN_OR_RETURN(s.drafter, draft_model_drafter(p, target, run, quiet));
  return s;
}

}  // namespace minfer::cli
