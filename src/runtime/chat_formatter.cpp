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
  f.bos_ = std::move(bos_token);
  f.eos_ = std::move(eos_token);
  return f;
}

std::string ChatFormatter::name() const {
  return template_ ? "template" : chat_format_name(builtin_);
}

Result<std::string> ChatFormatter::render(const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt) const {
  if (!template_) return render_chat(builtin_, messages);
  tmpl::List list;
  for (const ChatMessage& m : messages) {
    list.emplace_back(
        tmpl::Dict{{"role", tmpl::Value(m.role)}, {"content", tmpl::Value(m.content)}});
  }
  const tmpl::Dict context = {{"messages", tmpl::Value(std::move(list))},
                              {"add_generation_prompt", tmpl::Value(add_generation_prompt)},
                              {"bos_token", tmpl::Value(bos_)},
                              {"eos_token", tmpl::Value(eos_)}};
  auto text = template_->render(context);
  if (!text) return text.status().with_context("chat template");
  return text;
}

}  // namespace minfer::runtime
