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
#include <vector>

#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

namespace minfer::runtime {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatFormat { kChatML, kGemma, kLlama3, kPlain };

ChatFormat pick_chat_format(const model::HParams& hp, const tokenizer::Tokenizer& tok);
const char* chat_format_name(ChatFormat f);

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages);

}  // namespace minfer::runtime
