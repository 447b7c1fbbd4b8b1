// Reads a tokenizer vocabulary from a GGUF file's tokenizer.ggml.* keys.
//
// Contract: tokens and model are required; scores, token types, merges and
// special ids are optional, as in GGUF files in the wild. Errors name the key
// and the file (from gguf::File's getters). Thread-safe (pure function).
#pragma once

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace minfer::gguf {
class File;
}

namespace minfer::tokenizer {

Result<Vocab> vocab_from_gguf(const gguf::File& file);

}  // namespace minfer::tokenizer
