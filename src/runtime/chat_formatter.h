// How a conversation becomes prompt text for a model: its own chat template
// (the GGUF's tokenizer.chat_template, rendered by template/ with HF
// apply_chat_template's context: messages, add_generation_prompt, bos_token,
// eos_token) when the file has one, else the built-in format of
// runtime/chat_format.h.
//
// Contract: for_model() never fails: a template that does not parse is
// reported once through the log sink, naming the problem, and the built-in
// format is used instead. render() fails only where the template itself
// fails (raise_exception, a type error): the message says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/chat_format.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

namespace minfer::runtime {

// The prompt text's tokens, its special tokens parsed, BOS added as the
// vocabulary says unless the text already begins with the BOS token's text
// (a template that writes bos_token itself gets no second one).
Result<std::vector<int32_t>> encode_prompt(const tokenizer::Tokenizer& tok, std::string_view text);

class ChatFormatter {
 public:
  static ChatFormatter for_model(const model::Model& model);
  // The model with this template instead of its own (an error when it does
  // not parse: the user asked for it).
  static Result<ChatFormatter> with_template(const model::Model& model, std::string_view source);
  // A formatter over this template source (for tests and tools).
  static Result<ChatFormatter> from_template(std::string_view source, std::string bos_token,
                                             std::string eos_token);

  bool uses_template() const { return template_.has_value(); }
  // "template" or the built-in format's name.
  std::string name() const;
  // `variables` joins the template's context (HF apply_chat_template's
  // extra arguments: tools, enable_thinking, chat_template_kwargs' keys);
  // the built-in formats ignore them.
  Result<std::string> render(const std::vector<ChatMessage>& messages,
                             bool add_generation_prompt = true,
                             const tmpl::Dict& variables = {}) const;
  // The template's source ("" for a built-in format): what tool calling and
  // reasoning read the model's conventions from.
  const std::string& template_source() const { return source_; }

  // A lower bound on encode_prompt()'s token count for `text` with the
  // model's vocabulary, from the text's length alone: no token stands for
  // more bytes of text than the longest token's own text. True for every
  // template and format (a message count is not: a template may drop
  // messages, Gemma's turns fold system messages away). Lets a caller refuse
  // a prompt that cannot fit the context without tokenizing it. 0 for a
  // formatter made without a model (from_template()).
  int64_t min_tokens(std::string_view text) const;

 private:
  void measure_vocabulary(const tokenizer::Tokenizer& tok);

  ChatFormat builtin_ = ChatFormat::kPlain;
  std::optional<tmpl::Template> template_;
  std::string source_;
  std::string bos_, eos_;
  size_t longest_token_ = 0;  // bytes of the vocabulary's longest token text
};

}  // namespace minfer::runtime
