// The engine's side of speculative decoding (runtime/engine.h's contract,
// docs/ENGINE.md "Speculative decoding"): drafting before a step, and after
// it the in-order draws that decide how much of a draft is kept.
#include <algorithm>
#include <string>

#include "runtime/engine.h"
#include "runtime/engine_sequence.h"

namespace minfer::runtime {

Status Engine::prepare_draft(Sequence& s, int64_t room) {
  s.draft.clear();
  const SpeculativeParams& sp = s.request.speculative;
  if (sp.n_max <= 0) return Status::ok();
  // The step's room, and the budget's and the context's: the row after the
  // last draft is drawn from too, and every drafted position needs a cell
  // inside the sequence's budget (the pages reserved at admission).
  const int64_t most =
      std::min({static_cast<int64_t>(sp.n_max), room, s.request.max_tokens - s.generated - 1,
                options_.n_ctx - s.computed - 1});
  if (most < std::max(1, sp.n_min)) return Status::ok();
  MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> draft, drafter_->draft(s.id, s.tokens, sp, most));
  const auto n_vocab = static_cast<int32_t>(model_.hparams().n_vocab);
  if (static_cast<int64_t>(draft.size()) > most) draft.resize(static_cast<size_t>(most));
  // A token outside the vocabulary cannot be fed to the model: the draft
  // ends before it (the drafter is only ever a guess).
  const auto bad =
      std::find_if(draft.begin(), draft.end(), [&](int32_t t) { return t < 0 || t >= n_vocab; });
  draft.erase(bad, draft.end());
  if (static_cast<int64_t>(draft.size()) < sp.n_min) draft.clear();
  s.draft = std::move(draft);
  return Status::ok();
}

// Row i was computed after the last token and drafts 0..i-1, so it is what
// a one-token step would have drawn from once those were emitted: each
// draw in order, with the sequence's own sampler (and constraint), and the
// draft kept while the draws equal it. The first differing draw is emitted
// as well (the target's own token), and every later row is dropped undrawn:
// the sampler's random stream advances exactly once per emitted token.
void Engine::verify(Sequence& s, size_t first_row, std::span<const float> logits,
                    std::span<const int32_t> ids, std::vector<SequenceEvent>& events) {
  const std::vector<int32_t> draft = std::move(s.draft);
  s.draft.clear();
  const auto k = static_cast<int64_t>(draft.size());
  const auto n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  const int64_t last_position = s.computed - k - 1;  // the step's first token
  ++s.decode_steps;
  s.drafted += k;
  totals_.drafted_tokens += k;
  s.pages.publish_full(*pool_, s.tokens);  // (only positions before the draft)
  for (int64_t i = 0;; ++i) {
    // Positions up to the i-th draft hold tokens the sequence has emitted.
    s.computed = last_position + 1 + i;
    const size_t r = first_row + static_cast<size_t>(i);
    SequenceEvent e = s.event(FinishReason::kNone);
    Result<int32_t> next = ids.empty()
                               ? draw(s, logits.subspan(r * n_vocab, n_vocab), e, scratch_.front())
                               : Result<int32_t>(ids[r]);
    const bool agrees = i < k && next.is_ok() && *next == draft[static_cast<size_t>(i)];
    if (agrees) {
      ++s.draft_accepted;
      ++totals_.accepted_tokens;
    }
    if (!emit(s, std::move(e), std::move(next), events) || !agrees) break;
  }
  if (s.finished != FinishReason::kNone) return;  // finish() gave every cell back
  // The rejected drafts' cells: their keys and values are wrong for the
  // tokens emitted instead, and the positions are computed again next step.
  const int64_t held = s.pages.n_pages();
  s.pages.truncate(*pool_, s.computed);
  reserved_pages_ += held - s.pages.n_pages();  // still the sequence's budget
  s.pages.publish_full(*pool_, std::span(s.tokens).first(static_cast<size_t>(s.computed)));
}

}  // namespace minfer::runtime
