// llama-server's native API (serve/llama_api.h): what /completion reads and
// refuses, the JSON shapes it answers with (timings, probabilities, token
// pieces, the context error, /props), and the JSON-schema spellings
// parse_completion() takes from llama-server (serve/openai.h).
#include "serve/llama_api.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace minfer::serve {
namespace {

using nlohmann::json;

Result<LlamaCompletion> parse(const char* body) {
  runtime::SamplerParams defaults;
  defaults.seed = 77;
  return parse_llama_completion(json::parse(body), defaults);
}

TEST(LlamaApi, ReadsLlamaServerFields) {
  auto c = parse(R"({"prompt": "hi", "n_predict": 12, "n_probs": 3, "temperature": -1,
    "seed": -1, "top_k": 5, "min_p": 0.1, "repeat_penalty": 1.1, "repeat_last_n": 32,
    "presence_penalty": 0.5, "frequency_penalty": 0.25, "ignore_eos": true,
    "stop": ["a", "b", "c", "d", "e", "f"], "stream": true, "cache_prompt": true,
    "n_keep": 4, "t_max_predict_ms": 100, "id_slot": -1, "samplers": ["top_k"]})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  const CompletionParams& p = c->params;
  EXPECT_EQ(p.prompt, "hi");
  EXPECT_EQ(p.max_tokens, 12);
  EXPECT_EQ(c->n_probs, 3);
  EXPECT_EQ(p.top_logprobs, 3);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.0f);  // negative: greedy
  EXPECT_EQ(p.sampling.seed, 77u);                // -1: the server's seed
  EXPECT_EQ(p.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(p.sampling.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(p.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.frequency_penalty, 0.25f);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.stop.size(), 6u);  // no OpenAI limit of four
  EXPECT_TRUE(p.stream);
  EXPECT_EQ(p.n, 1);
}

TEST(LlamaApi, NPredictLimits) {
  auto c = parse(R"({"prompt": "x", "n_predict": -1})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.max_tokens, -1);
  c = parse(R"({"prompt": "x", "max_tokens": 9})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.max_tokens, 9);
  c = parse(R"({"prompt": "x"})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.max_tokens, -1);
  EXPECT_EQ(c->params.top_logprobs, -1);
  for (const char* bad :
       {R"({"prompt": "x", "n_predict": 0})", R"({"prompt": "x", "n_predict": -2})",
        R"({"prompt": "x", "n_predict": "5"})"}) {
    auto r = parse(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.message().find("n_predict"), std::string::npos) << r.message();
  }
}

TEST(LlamaApi, PromptShapes) {
  auto c = parse(R"({"prompt": [2, 651, 9]})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.prompt_tokens, (std::vector<int32_t>{2, 651, 9}));
  EXPECT_TRUE(c->mixed_prompt.empty());

  c = parse(R"({"prompt": [2, "hello", 9]})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  ASSERT_EQ(c->mixed_prompt.size(), 3u);
  EXPECT_EQ(std::get<int32_t>(c->mixed_prompt[0]), 2);
  EXPECT_EQ(std::get<std::string>(c->mixed_prompt[1]), "hello");

  c = parse(R"({"prompt": ["one"]})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.prompt, "one");
  c = parse(R"({"prompt": [[5, 6]]})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.prompt_tokens, (std::vector<int32_t>{5, 6}));
  c = parse(R"({"prompt": {"prompt_string": "obj"}})");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->params.prompt, "obj");
}

TEST(LlamaApi, RefusesWhatItCannotDoNamingIt) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"prompt": ["a", "b"]})", "several prompts"},
      {R"({"prompt": [[1], [2]]})", "several prompts"},
      {R"({"prompt": {"prompt_string": "a", "multimodal_data": ["AAAA"]}})", "multimodal"},
      {R"({"prompt": [1, -3]})", "prompt"},
      {R"({})", "prompt"},
      {R"({"prompt": "x", "grammar": 3})", "grammar"},
      {R"({"prompt": "x", "grammar": "root ::= \"a\"", "json_schema": {}})", "json_schema"},
      {R"({"prompt": "x", "return_tokens": true})", "return_tokens"},
      {R"({"prompt": "x", "post_sampling_probs": true})", "post_sampling_probs"},
      {R"({"prompt": "x", "n_cmpl": 2})", "n_cmpl"},
      {R"({"prompt": "x", "n_probs": 21})", "n_probs"},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos"},
      {R"({"prompt": "x", "repeat_last_n": -2})", "repeat_last_n"},
      {R"({"prompt": "x", "stop": [1]})", "stop"},
      {R"({"prompt": "x", "top_p": 2})", "top_p"},
  };
  for (const auto& [body, needle] : bad) {
    auto r = parse(body);
    ASSERT_FALSE(r.is_ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.message().find(needle), std::string::npos) << body << ": " << r.message();
  }
  // An empty grammar is llama-server's "none".
  EXPECT_TRUE(parse(R"({"prompt": "x", "grammar": ""})").is_ok());
}

TEST(LlamaApi, GrammarOnEveryDoor) {
  auto r = parse(R"({"prompt": "x", "grammar": "root ::= \"a\""})");
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->params.format, CompletionParams::Format::kGrammar);
  EXPECT_EQ(r->params.grammar, "root ::= \"a\"");
  const json chat = json::parse(
      R"({"messages": [{"role": "user", "content": "x"}], "grammar": "root ::= \"a\""})");
  auto c = parse_completion(chat, true, runtime::SamplerParams{});
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->format, CompletionParams::Format::kGrammar);
  // With a JSON format too: a 400 naming both.
  const json both = json::parse(
      R"({"prompt": "x", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})");
  auto b = parse_completion(both, false, runtime::SamplerParams{});
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.message().find("'grammar'"), std::string::npos) << b.message();
  EXPECT_NE(b.message().find("response_format"), std::string::npos) << b.message();
}

TEST(LlamaApi, JsonSchemaSpellings) {
  using Format = CompletionParams::Format;
  const std::pair<const char*, Format> cases[] = {
      {R"({"prompt": "x", "json_schema": {"type": "object"}})", Format::kJsonSchema},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "schema": {"type": "integer"}}})",
       Format::kJsonSchema},
      {R"({"prompt": "x", "response_format": {"type": "json_object", "schema": {"type": "integer"}}})",
       Format::kJsonSchema},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}})", Format::kJsonObject},
      {R"({"prompt": "x", "json_schema": {"type": "object"}, "response_format": {"type": "json_object"}})",
       Format::kJsonObject},
  };
  for (const auto& [body, want] : cases) {
    auto r = parse(body);
    ASSERT_TRUE(r.is_ok()) << body << ": " << r.message();
    EXPECT_EQ(r->params.format, want) << body;
  }
  EXPECT_EQ(ordered_schema(R"({"json_schema": {"type": "object"}})"),
            nlohmann::ordered_json::parse(R"({"type": "object"})"));
  EXPECT_EQ(
      ordered_schema(R"({"response_format": {"type": "json_schema", "schema": {"b": 1, "a": 2}},
                               "json_schema": {"type": "object"}})")
          .dump(),
      R"({"b":1,"a":2})");  // response_format wins, keys in their order
  EXPECT_FALSE(parse(R"({"prompt": "x", "json_schema": 3})").is_ok());
  EXPECT_FALSE(
      parse(R"({"prompt": "x", "response_format": {"type": "json_schema", "schema": 3}})").is_ok());
}

TEST(LlamaApi, TimingsAreConsistent) {
  const json t = timings_json({10, 50.0, 4, 20.0});
  EXPECT_EQ(t["prompt_n"], 10);
  EXPECT_DOUBLE_EQ(t["prompt_per_token_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 200.0);
  EXPECT_EQ(t["predicted_n"], 4);
  EXPECT_DOUBLE_EQ(t["predicted_per_token_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(t["predicted_per_second"].get<double>(), 200.0);
  // No time, no tokens: zeros, never a division by zero.
  const json z = timings_json({0, 0.0, 0, 0.0});
  EXPECT_EQ(z["predicted_per_second"].get<double>(), 0.0);
  EXPECT_EQ(z["prompt_per_token_ms"].get<double>(), 0.0);
}

TEST(LlamaApi, ProbabilitiesShape) {
  TokenLogprob lp{"Hi", -0.5f, {{"Hi", -0.5f}, {"Ho", -1.5f}}, 7, {7, 8}};
  const json j = probabilities_json({lp});
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], 7);
  EXPECT_EQ(j[0]["token"], "Hi");
  EXPECT_EQ(j[0]["bytes"], json::array({72, 105}));
  ASSERT_EQ(j[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(j[0]["top_logprobs"][1]["id"], 8);
  EXPECT_EQ(j[0]["top_logprobs"][1]["token"], "Ho");
  EXPECT_DOUBLE_EQ(j[0]["top_logprobs"][1]["logprob"].get<double>(), -1.5);
}

TEST(LlamaApi, PiecesAreTextOrBytes) {
  EXPECT_EQ(piece_json("world"), json("world"));
  EXPECT_EQ(piece_json("\xC3"), json::array({195}));  // half of 'á'
}

TEST(LlamaApi, ExceedContextBody) {
  const json j = exceed_context_body({5000, 1024, false});
  EXPECT_EQ(j["error"]["type"], "exceed_context_size_error");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_EQ(j["error"]["n_prompt_tokens"], 5000);
  EXPECT_EQ(j["error"]["n_ctx"], 1024);
  EXPECT_EQ(j["error"]["message"],
            "request (5000 tokens) exceeds the available context size (1024 tokens), try "
            "increasing it");
  const json lower = exceed_context_body({3000, 1024, true});
  EXPECT_NE(lower["error"]["message"].get<std::string>().find("at least 3000"), std::string::npos);
}

TEST(LlamaApi, StopTextNamesItsStopWord) {
  StopText t({"END", "STOP"});
  EXPECT_EQ(t.push("abc ST"), "abc ");
  EXPECT_EQ(t.stop_word(), "");
  EXPECT_EQ(t.push("OP more"), "");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.stop_word(), "STOP");
}

TEST(LlamaApi, PropsShape) {
  ServerProps p;
  p.model_id = "m";
  p.model_path = "/x/m.gguf";
  p.chat_template = "{{ messages }}";
  p.n_ctx = 512;
  p.total_slots = 3;
  const json j = props_json(p);
  EXPECT_EQ(j["total_slots"], 3);
  EXPECT_EQ(j["model_path"], "/x/m.gguf");
  EXPECT_EQ(j["chat_template"], "{{ messages }}");
  EXPECT_EQ(j["default_generation_settings"]["n_ctx"], 512);
  EXPECT_TRUE(j["default_generation_settings"]["params"].contains("temperature"));
  EXPECT_EQ(j["modalities"]["vision"], false);
  EXPECT_TRUE(j["build_info"].is_string());
  EXPECT_EQ(slots_unsupported_json()["error"]["code"], 501);
}

}  // namespace
}  // namespace minfer::serve
