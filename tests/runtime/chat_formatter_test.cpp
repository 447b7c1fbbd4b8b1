// ChatFormatter: a conversation through a model's chat template gives what
// jinja2 gives for the same template and messages (the qwen2 cases of
// tests/template/golden/templates.json, string contents only); a model file
// without a template keeps its built-in format.
#include "runtime/chat_formatter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/json.h"
#include "runtime/runtime_testutil.h"
#include "test_models.h"

namespace minfer::runtime {
namespace {

TEST(ChatFormatter, TemplateConversationsMatchJinja2) {
  std::ifstream f(std::string(MINFER_TEST_DATA_DIR) + "/../template/golden/templates.json");
  ASSERT_TRUE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  auto cases = parse_json(ss.str());
  ASSERT_TRUE(cases.is_ok()) << cases.message();
  int checked = 0;
  for (const nlohmann::json& c : *cases) {
    const std::string name = c.at("name").get<std::string>();
    if (!name.starts_with("qwen2/") && !name.starts_with("chatml_like/") &&
        !name.starts_with("headers_like/")) {
      continue;
    }
    const nlohmann::json& ctx = c.at("context");
    std::vector<ChatMessage> messages;
    bool strings = true;
    for (const nlohmann::json& m : ctx.at("messages")) {
      strings = strings && m.at("content").is_string();
      if (strings) {
        messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      }
    }
    if (!strings || c.contains("error")) continue;
    auto fmt = ChatFormatter::from_template(c.at("template").get<std::string>(),
                                            ctx.at("bos_token").get<std::string>(),
                                            ctx.at("eos_token").get<std::string>());
    ASSERT_TRUE(fmt.is_ok()) << name << ": " << fmt.message();
    EXPECT_TRUE(fmt->uses_template());
    auto text = fmt->render(messages, ctx.at("add_generation_prompt").get<bool>());
    ASSERT_TRUE(text.is_ok()) << name << ": " << text.message();
    EXPECT_EQ(*text, c.at("expected").get<std::string>()) << name;
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

TEST(ChatFormatter, AFileWithoutATemplateKeepsTheBuiltInFormat) {
  const model::Model& m = testing::tiny_model("tiny-qwen2");
  const ChatFormatter f = ChatFormatter::for_model(m);
  EXPECT_FALSE(f.uses_template());
  const std::vector<ChatMessage> msgs = {{"user", "hi"}};
  const ChatFormat builtin = pick_chat_format(m.hparams(), m.tokenizer());
  EXPECT_EQ(f.name(), chat_format_name(builtin));
  auto text = f.render(msgs);
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, render_chat(builtin, msgs));
}

TEST(ChatFormatter, ATemplateErrorIsTheRenderError) {
  auto f = ChatFormatter::from_template(
      "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}", "",
      "");
  ASSERT_TRUE(f.is_ok());
  auto text = f->render({{"user", "hi"}});
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.message().find("system first"), std::string::npos) << text.message();
  EXPECT_FALSE(ChatFormatter::from_template("{% for %}", "", "").is_ok());
}

// Not asserted, printed: where the CPU time of a long conversation goes with
// the real Gemma 3 270M (its built-in format), render and tokenization apart,
// at sizes that show whether the cost grows faster than the input.
TEST(ChatFormatter, LongConversationCostIsPrinted) {
  const std::string path = ::minfer::testing::gemma3_model_path();
  if (path.empty()) GTEST_SKIP() << ::minfer::testing::kMissingGemma3;
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.message();
  const ChatFormatter f = ChatFormatter::for_model(**model);
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  for (const size_t n : {5'000u, 10'000u, 20'000u}) {
    std::vector<ChatMessage> msgs;
    for (size_t i = 0; i < n; ++i) msgs.push_back({i % 2 ? "assistant" : "user", "hi"});
    const auto t0 = Clock::now();
    auto text = f.render(msgs);
    ASSERT_TRUE(text.is_ok()) << text.message();
    const auto t1 = Clock::now();
    auto ids = encode_prompt((*model)->tokenizer(), *text);
    ASSERT_TRUE(ids.is_ok()) << ids.message();
    const auto t2 = Clock::now();
    const int64_t at_least = f.min_tokens(*text);
    const auto t3 = Clock::now();
    std::printf(
        "%zu messages (%s): render %.1f ms, %zu bytes -> %zu tokens in %.1f ms "
        "(at least %lld by length, in %.3f ms)\n",
        n, f.name().c_str(), ms(t1 - t0), text->size(), ids->size(), ms(t2 - t1),
        static_cast<long long>(at_least), ms(t3 - t2));
    EXPECT_LE(at_least, static_cast<int64_t>(ids->size()));
    EXPECT_GT(at_least, 0);
  }
}

}  // namespace
}  // namespace minfer::runtime
