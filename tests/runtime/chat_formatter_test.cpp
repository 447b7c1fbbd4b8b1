// ChatFormatter: a conversation through a model's chat template gives what
// jinja2 gives for the same template and messages (the qwen2 cases of
// tests/template/golden/templates.json, string contents only); a model file
// without a template keeps its built-in format.
#include "runtime/chat_formatter.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/json.h"
#include "runtime/runtime_testutil.h"

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
  for (const JsonValue& c : cases->items()) {
    const std::string name = c.find("name")->as_string();
    if (!name.starts_with("qwen2/") && !name.starts_with("chatml_like/") &&
        !name.starts_with("headers_like/")) {
      continue;
    }
    const JsonValue& ctx = *c.find("context");
    std::vector<ChatMessage> messages;
    bool strings = true;
    for (const JsonValue& m : ctx.find("messages")->items()) {
      strings = strings && m.find("content")->is_string();
      if (strings)
        messages.push_back({m.find("role")->as_string(), m.find("content")->as_string()});
    }
    if (!strings || c.find("error") != nullptr) continue;
    auto fmt = ChatFormatter::from_template(c.find("template")->as_string(),
                                            ctx.find("bos_token")->as_string(),
                                            ctx.find("eos_token")->as_string());
    ASSERT_TRUE(fmt.is_ok()) << name << ": " << fmt.message();
    EXPECT_TRUE(fmt->uses_template());
    auto text = fmt->render(messages, ctx.find("add_generation_prompt")->as_bool());
    ASSERT_TRUE(text.is_ok()) << name << ": " << text.message();
    EXPECT_EQ(*text, c.find("expected")->as_string()) << name;
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

}  // namespace
}  // namespace minfer::runtime
