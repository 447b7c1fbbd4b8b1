// response_format json_object / json_schema and llama-server's GBNF
// "grammar": the ConstraintFactory that turns a request's format into a
// grammar::JsonConstraint (or grammar::GbnfConstraint) per choice, behind the
// engine's runtime::TokenConstraint.
//
// Contract: json_formats(tokenizer) builds the model's token vocabulary once
// (docs/GRAMMAR.md: ~0.25 s for Gemma 3's 262,144 tokens) and returns a
// factory. For each call it compiles the request's schema (a schema outside
// the supported subset, or past one of the size, depth and nesting limits of
// grammar/json_grammar.h, is an invalid-argument Status naming the keyword
// or the limit: HTTP 400) and gives a fresh constraint; json_object means any
// JSON object. A GBNF grammar is parsed the same way (grammar/gbnf.h: a
// syntax error names its line and column, a grammar past a limit names it;
// HTTP 400). The call runs on the caller's (HTTP handler) thread; the
// limits keep it bounded (docs/GRAMMAR.md, "Limits") and keep a schema's
// size from failing the request later on the engine thread.
#pragma once

#include "base/status.h"
#include "serve/completion.h"
#include "tokenizer/tokenizer.h"

namespace minfer::serve {

Result<ConstraintFactory> json_formats(const tokenizer::Tokenizer& tokenizer);

}  // namespace minfer::serve
