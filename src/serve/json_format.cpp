#include "serve/json_format.h"

#include "grammar/gbnf.h"
#include "grammar/gbnf_constraint.h"
#include "grammar/json_constraint.h"
#include "grammar/json_grammar.h"
#include "grammar/token_vocabulary.h"

namespace minfer::serve {
namespace {

class JsonFormat : public runtime::TokenConstraint {
 public:
  explicit JsonFormat(grammar::JsonConstraint c) : c_(std::move(c)) {}
  Status mask(std::span<float> logits) const override { return c_.mask(logits); }
  Status accept(int32_t token) override { return c_.accept(token); }

 private:
  grammar::JsonConstraint c_;
};

class GbnfFormat : public runtime::TokenConstraint {
 public:
  explicit GbnfFormat(grammar::GbnfConstraint c) : c_(std::move(c)) {}
  Status mask(std::span<float> logits) const override { return c_.mask(logits); }
  Status accept(int32_t token) override { return c_.accept(token); }

 private:
  grammar::GbnfConstraint c_;
};

Result<std::shared_ptr<runtime::TokenConstraint>> gbnf_format(
    const std::string& text, const std::shared_ptr<const grammar::TokenVocabulary>& vocab) {
  Result<std::shared_ptr<const grammar::GbnfGrammar>> g = grammar::GbnfGrammar::parse(text);
  if (!g) return g.status().with_context("'grammar'");
  Result<grammar::GbnfConstraint> c = grammar::GbnfConstraint::create(*g, vocab);
  if (!c) return c.status().with_context("'grammar'");
  return std::shared_ptr<runtime::TokenConstraint>(std::make_shared<GbnfFormat>(std::move(*c)));
}

}  // namespace

Result<ConstraintFactory> json_formats(const tokenizer::Tokenizer& tokenizer) {
  MINFER_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::TokenVocabulary> vocab,
                          grammar::TokenVocabulary::from_tokenizer(tokenizer));
  return ConstraintFactory([vocab](const CompletionParams& p)
                               -> Result<std::shared_ptr<runtime::TokenConstraint>> {
    if (p.format == CompletionParams::Format::kGrammar) return gbnf_format(p.grammar, vocab);
    Result<std::shared_ptr<const grammar::JsonGrammar>> g =
        p.format == CompletionParams::Format::kJsonSchema
            ? grammar::JsonGrammar::from_schema(p.schema)
            : grammar::JsonGrammar::any_json();
    if (!g) return g.status().with_context("response_format");
    MINFER_ASSIGN_OR_RETURN(grammar::JsonConstraint c, grammar::JsonConstraint::create(*g, vocab));
    return std::shared_ptr<runtime::TokenConstraint>(std::make_shared<JsonFormat>(std::move(c)));
  });
}

}  // namespace minfer::serve
