#include "runtime/chat_formatter.h"

#include <algorithm>

#include "base/log.h"

namespace minfer::runtime {

Result<std::vector<int32_t>> encode_prompt(const tokenizer::Tokenizer& tok, std::string_view text) {
  const bool has_bos = tok.bos() >= 0 && !tok.token_text(tok.bos()).empty() &&
                       text.starts_with(tok.token_text(tok.bos()));
  return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

ChatFormatter ChatFormatter::for_model(const model::Model& model) {
  ChatFormatter builtin;
  builtin.builtin_ = pick_chat_format(model.hparams(), model.tokenizer());
  builtin.measure_vocabulary(model.tokenizer());
  auto source = model.file().get_string("tokenizer.chat_template");
  if (!source) return builtin;  // no template in the file: the built-in format
  auto f = with_template(model, *source);
  if (!f) {
    log_warning("the model's chat template cannot be used (" + f.message() +
                "); using the built-in " + chat_format_name(builtin.builtin_) + " format");
    return builtin;
  }
  return std::move(*f);
}

Result<ChatFormatter> ChatFormatter::with_template(const model::Model& model,
                                                   std::string_view source) {
  const tokenizer::Tokenizer& tok = model.tokenizer();
  MINFER_ASSIGN_OR_RETURN(ChatFormatter f,
                          from_template(source, tok.bos() >= 0 ? tok.token_text(tok.bos()) : "",
                                        tok.eos() >= 0 ? tok.token_text(tok.eos()) : ""));
  f.builtin_ = pick_chat_format(model.hparams(), tok);
  f.measure_vocabulary(tok);
  return f;
}

void ChatFormatter::measure_vocabulary(const tokenizer::Tokenizer& tok) {
  longest_token_ = 0;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    longest_token_ = std::max(longest_token_, tok.token_text(id).size());
  }
}

int64_t ChatFormatter::min_tokens(std::string_view text) const {
  if (longest_token_ == 0) return 0;
  return static_cast<int64_t>((text.size() + longest_token_ - 1) / longest_token_);
}

Result<ChatFormatter> ChatFormatter::from_template(std::string_view source, std::string bos_token,
                                                   std::string eos_token) {
  MINFER_ASSIGN_OR_RETURN(tmpl::Template t, tmpl::Template::parse(source));
  ChatFormatter f;
  f.template_ = std::move(t);
  f.source_ = std::string(source);
  f.bos_ = std::move(bos_token);
  f.eos_ = std::move(eos_token);
  return f;
}

std::string ChatFormatter::name() const {
  return template_ ? "template" : chat_format_name(builtin_);
}

namespace {

// A message as HF hands it to a template: the keys the request gave.
// `reasoning_key`: the name the template reads an assistant's earlier
// reasoning under (gpt-oss's reads `thinking`).
tmpl::Value message_value(const ChatMessage& m, const char* reasoning_key) {
  tmpl::Dict d{{"role", tmpl::Value(m.role)},
               {"content", m.null_content ? tmpl::Value::none() : tmpl::Value(m.content)}};
  if (!m.tool_calls.empty()) {
    tmpl::List calls;
    for (const ChatToolCall& c : m.tool_calls) {
      const tmpl::Value args =
          c.arguments_value.is_undefined() ? tmpl::Value(c.arguments) : c.arguments_value;
      tmpl::Dict call{{"type", tmpl::Value("function")},
                      {"function", tmpl::Value(tmpl::Dict{{"name", tmpl::Value(c.name)},
                                                          {"arguments", args}})}};
      if (!c.id.empty()) call.insert(call.begin(), {"id", tmpl::Value(c.id)});
      calls.emplace_back(std::move(call));
    }
    d.emplace_back("tool_calls", tmpl::Value(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) d.emplace_back("tool_call_id", tmpl::Value(m.tool_call_id));
  if (!m.name.empty()) d.emplace_back("name", tmpl::Value(m.name));
  if (!m.reasoning_content.empty()) {
    d.emplace_back(reasoning_key, tmpl::Value(m.reasoning_content));
  }
  return tmpl::Value(std::move(d));
}

}  // namespace

Result<std::string> ChatFormatter::render(const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt,
                                          const tmpl::Dict& variables) const {
  if (!template_) return render_chat(builtin_, messages);
  tmpl::List list;
  // A template that reads `thinking` and never `reasoning_content` gets the
  // reasoning under the name it knows.
  const bool thinking = source_.find("thinking") != std::string::npos &&
                        source_.find("reasoning_content") == std::string::npos;
  const char* reasoning_key = thinking ? "thinking" : "reasoning_content";
  for (const ChatMessage& m : messages) list.push_back(message_value(m, reasoning_key));
  tmpl::Dict context = {{"messages", tmpl::Value(std::move(list))},
                        {"add_generation_prompt", tmpl::Value(add_generation_prompt)},
                        {"bos_token", tmpl::Value(bos_)},
                        {"eos_token", tmpl::Value(eos_)}};
  for (const auto& var : variables) {
    const auto same = [&](const auto& kv) { return kv.first == var.first; };
    if (auto it = std::find_if(context.begin(), context.end(), same); it != context.end()) {
      it->second = var.second;  // chat_template_kwargs may set what HF passes, as HF lets them
    } else {
      context.push_back(var);
    }
  }
  auto text = template_->render(context);
  if (!text) return text.status().with_context("chat template");
  return text;
}

}  // namespace minfer::runtime
