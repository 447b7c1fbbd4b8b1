// Built-in chat formats: how a conversation turns into prompt text for the
// model families we run (ChatML for Qwen, Gemma's turns, Llama 3 headers).
//
// Contract: pick_chat_format() chooses by the vocabulary (which special tokens
// exist) and architecture; render() returns the text for the whole
// conversation so far, ending with the assistant's opening so that the model
// continues as the assistant. Special tokens appear as text and must be
// tokenized with parse_special. Pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/hparams.h"
#include "template/value.h"
#include "tokenizer/tokenizer.h"

namespace minfer::runtime {

// A call an assistant turn made (OpenAI's tool_calls[i]).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the JSON text the request gave
  // What a template sees as `arguments`: the parsed object (templates apply
  // tojson or items() to it, as HF passes it), or undefined to pass the text.
  tmpl::Value arguments_value;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  // Tool calling and reasoning, seen only by a chat template (the built-in
  // formats render role and content alone).
  std::vector<ChatToolCall> tool_calls;  // an assistant's calls
  std::string tool_call_id;              // a tool result: the call it answers
  std::string name;                      // a tool result: the tool's name, when given
  // An assistant's earlier reasoning, when given (a template that reads
  // `thinking` and never `reasoning_content`, gpt-oss's, sees it as thinking).
  std::string reasoning_content;
  bool null_content = false;  // content was null (a turn of calls only)
};

enum class ChatFormat { kChatML, kGemma, kLlama3, kPlain };

ChatFormat pick_chat_format(const model::HParams& hp, const tokenizer::Tokenizer& tok);
const char* chat_format_name(ChatFormat f);

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages);

}  // namespace minfer::runtime
