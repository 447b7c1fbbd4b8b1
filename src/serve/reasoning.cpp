#include "serve/reasoning.h"

#include <algorithm>

namespace minfer::serve {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The length of the longest tail of `s` that `tag` begins with (short of
// the whole tag).
size_t partial_tail(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k) {
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

Result<ReasoningFormat> parse_reasoning_format(std::string_view name, std::string_view field) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek" || name == "deepseek-legacy") return ReasoningFormat::kDeepSeek;
  if (name == "auto") return ReasoningFormat::kAuto;
  return Status::invalid_argument(std::string(field) + " must be none, deepseek or auto, not '" +
                                  std::string(name) + "'");
}

bool prompt_opens_thinking(std::string_view prompt) {
  while (!prompt.empty() && is_space(prompt.back())) prompt.remove_suffix(1);
  return prompt.ends_with(kOpen);
}

// Moves what is decided from pending_ to `out`, state by state.
void ReasoningStream::step(ReasoningText& out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        const std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.starts_with(kOpen)) {
          pending_.erase(0, i + kOpen.size());
          state_ = State::kThinking;
          continue;
        }
        if (kOpen.starts_with(rest)) return;  // still undecided (empty included)
        state_ = State::kContent;
        continue;
      }
      case State::kThinking: {
        const size_t close = pending_.find(kClose);
        if (close == std::string::npos) {
          const size_t keep = partial_tail(pending_, kClose);
          out.reasoning += pending_.substr(0, pending_.size() - keep);
          pending_.erase(0, pending_.size() - keep);
          return;
        }
        out.reasoning += pending_.substr(0, close);
        pending_.erase(0, close + kClose.size());
        state_ = State::kAfterThinking;
        continue;
      }
      case State::kAfterThinking: {
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        pending_.erase(0, i);
        if (pending_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

ReasoningText ReasoningStream::push(std::string_view piece) {
  ReasoningText out;
  pending_ += piece;
  step(out);
  return out;
}

ReasoningText ReasoningStream::finish() {
  ReasoningText out;
  step(out);
  if (state_ == State::kThinking) {
    out.reasoning += pending_;  // never closed: all of it was thinking
  } else {
    out.content += pending_;
  }
  pending_.clear();
  return out;
}

}  // namespace minfer::serve
