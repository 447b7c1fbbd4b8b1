#include "runtime/chat_format.h"

namespace minfer::runtime {

ChatFormat pick_chat_format(const model::HParams& hp, const tokenizer::Tokenizer& tok) {
  if (tok.find_token("<|im_start|>") >= 0) return ChatFormat::kChatML;
  if (hp.arch == model::Arch::kGemma3 || tok.find_token("<start_of_turn>") >= 0) {
    return ChatFormat::kGemma;
  }
  if (tok.find_token("<|start_header_id|>") >= 0) return ChatFormat::kLlama3;
  return ChatFormat::kPlain;
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::kChatML:
      return "chatml";
    case ChatFormat::kGemma:
      return "gemma";
    case ChatFormat::kLlama3:
      return "llama3";
    case ChatFormat::kPlain:
      return "plain";
  }
  return "?";
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages) {
  std::string out;
  switch (f) {
    case ChatFormat::kChatML:
      for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatFormat::kGemma: {
      // Gemma has no system role: a system message is prepended to the first user turn.
      std::string system;
      for (const auto& m : messages) {
        if (m.role == "system") {
          system += m.content + "\n\n";
          continue;
        }
        const char* role = m.role == "assistant" ? "model" : "user";
        std::string content = m.content;
        if (m.role == "user" && !system.empty()) {
          content = system + content;
          system.clear();
        }
        out += std::string("<start_of_turn>") + role + "\n" + content + "<end_of_turn>\n";
      }
      return out + "<start_of_turn>model\n";
    }
    case ChatFormat::kLlama3:
      for (const auto& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      }
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFormat::kPlain:
      for (const auto& m : messages) out += m.role + ": " + m.content + "\n";
      return out + "assistant:";
  }
  return out;
}

}  // namespace minfer::runtime
