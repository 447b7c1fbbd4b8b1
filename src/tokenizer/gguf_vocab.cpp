#include "tokenizer/gguf_vocab.h"

#include "gguf/file.h"

namespace minfer::tokenizer {
namespace {

Status read_id(const gguf::File& f, const char* key, int32_t& out) {
  if (!f.has(key)) return Status::ok();
  MINFER_ASSIGN_OR_RETURN(uint32_t id, f.get_u32(key));
  out = static_cast<int32_t>(id);
  return Status::ok();
}

Status read_flag(const gguf::File& f, const char* key, bool& out) {
  if (!f.has(key)) return Status::ok();
  MINFER_ASSIGN_OR_RETURN(out, f.get_bool(key));
  return Status::ok();
}

}  // namespace

Result<Vocab> vocab_from_gguf(const gguf::File& f) {
  Vocab v;
  MINFER_ASSIGN_OR_RETURN(v.model, f.get_string("tokenizer.ggml.model"));
  if (f.has("tokenizer.ggml.pre")) {
    MINFER_ASSIGN_OR_RETURN(v.pre, f.get_string("tokenizer.ggml.pre"));
  }
  MINFER_ASSIGN_OR_RETURN(v.tokens, f.get_string_array("tokenizer.ggml.tokens"));
  if (f.has("tokenizer.ggml.scores")) {
    MINFER_ASSIGN_OR_RETURN(v.scores, f.get_f32_array("tokenizer.ggml.scores"));
  }
  if (f.has("tokenizer.ggml.token_type")) {
    MINFER_ASSIGN_OR_RETURN(v.token_types, f.get_i32_array("tokenizer.ggml.token_type"));
  }
  if (f.has("tokenizer.ggml.merges")) {
    MINFER_ASSIGN_OR_RETURN(v.merges, f.get_string_array("tokenizer.ggml.merges"));
  }
  MINFER_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.bos_token_id", v.bos_id));
  MINFER_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.eos_token_id", v.eos_id));
  MINFER_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.eot_token_id", v.eot_id));
  MINFER_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.unknown_token_id", v.unk_id));
  MINFER_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.padding_token_id", v.pad_id));
  // llama.cpp's defaults when the flags are absent: SPM vocabularies add BOS
  // and a space prefix; byte-level BPE ones add nothing.
  v.add_bos = v.model == "llama";
  v.add_space_prefix = v.model == "llama";
  MINFER_RETURN_IF_ERROR(read_flag(f, "tokenizer.ggml.add_bos_token", v.add_bos));
  MINFER_RETURN_IF_ERROR(read_flag(f, "tokenizer.ggml.add_eos_token", v.add_eos));
  MINFER_RETURN_IF_ERROR(read_flag(f, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  return v;
}

}  // namespace minfer::tokenizer
