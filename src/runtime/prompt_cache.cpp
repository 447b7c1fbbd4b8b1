#include "runtime/prompt_cache.h"

namespace minfer::runtime {

std::span<const int32_t> PromptCache::prepare(Session& session, std::span<const int32_t> prompt) {
  size_t common = 0;
  while (common < tokens_.size() && common < prompt.size() && tokens_[common] == prompt[common]) {
    ++common;
  }
  if (common > 0 && common == prompt.size()) --common;  // always evaluate at least one token
  tokens_.resize(common);
  session.truncate(static_cast<int64_t>(common));
  return prompt.subspan(common);
}

void PromptCache::commit(Session& session, std::span<const int32_t> evaluated) {
  tokens_.insert(tokens_.end(), evaluated.begin(), evaluated.end());
  session.truncate(static_cast<int64_t>(tokens_.size()));
}

}  // namespace minfer::runtime
