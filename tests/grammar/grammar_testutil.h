// Helpers for the grammar tests: hand-made vocabularies, byte-by-byte feeding,
// seeded random walks, and an independent validator for the supported JSON
// Schema subset (written from the JSON Schema spec, not from src/grammar).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_constraint.h"

namespace minfer::grammar::testing {

// Token id b (0..255) is the single byte b; kByteEog is end of generation;
// kByteSpecial is a special (control) token.
inline constexpr int32_t kByteEog = 256;
inline constexpr int32_t kByteSpecial = 257;
std::shared_ptr<const TokenVocabulary> byte_vocabulary();

// Multi-byte vocabularies with tokens that span structural boundaries
// ("\": \"", "\"},{\""), escapes, partial UTF-8 and whitespace runs. `which`
// 0: every byte plus those; 1: the bytes a JSON text needs (printable ASCII,
// '\n', 0x80..0xF4) and tokens cut from sample JSON texts. The last two ids are EOG
// and a special token.
std::shared_ptr<const TokenVocabulary> multi_byte_vocabulary(int which);

// Feeds `text` one byte token at a time (byte vocabulary). Returns the index
// of the first rejected byte, or -1 when every byte was accepted.
int first_rejected_byte(JsonConstraint& c, const std::string& text);

// True when the constraint accepts `text` byte by byte, is complete, and then
// accepts EOG.
bool accepts_whole(const std::shared_ptr<const JsonGrammar>& g, const std::string& text);

struct WalkResult {
  std::string text;
  bool reached_eog = false;
  int steps = 0;
  std::string error;  // a mask()/accept() error, if any
};

// Random walk: at each step mask a row of random logits and take the best
// allowed token, until EOG or `max_steps`. After `close_after` steps the walk
// prefers EOG, then tokens holding a closing byte ('"', '}', ']') or a digit,
// so that it ends.
WalkResult random_walk(const std::shared_ptr<const JsonGrammar>& g,
                       const std::shared_ptr<const TokenVocabulary>& vocab, uint64_t seed,
                       int max_steps, int close_after);

// JSON Schema validation of `value` for the subset src/grammar supports, with
// its one documented deviation: absent additionalProperties next to
// properties means false. `root` resolves "#..." $refs. Returns "" when valid,
// else what failed and where.
std::string validate(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema,
                     const nlohmann::ordered_json& root);

}  // namespace minfer::grammar::testing
