#include "model/tensor_split.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "quant/reference.h"
#include "quant/tensor_type.h"

namespace minfer::model {
namespace {

// What follows "blk.N." in a layer tensor's name ("" outside the layers).
std::string_view layer_part(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return {};
  const size_t dot = name.find('.', 4);
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (s == n) return true;
  }
  return false;
}

// The part of one dimension a rank takes: elements [first, first + count)
// of dims[dim] (dim 0: within each row; dim 1: rows within each expert).
struct Cut {
  int dim = 0;
  int64_t first = 0, count = 0;
};

// Rank r's equal share of n things.
Cut share(int dim, int64_t n, int rank, int ranks, int64_t unit = 1) {
  const int64_t part = n / ranks;
  return {dim, rank * part * unit, part * unit};
}

// The KV heads rank r reads: its share, or (fewer KV heads than ranks) the
// one its query heads belong to, kept by several ranks.
Cut kv_cut(const HParams& hp, int dim, int rank, int ranks) {
  if (hp.n_head_kv >= ranks) return share(dim, hp.n_head_kv, rank, ranks, hp.head_dim);
  const int64_t head = static_cast<int64_t>(rank) * hp.n_head_kv / ranks;
  return {dim, head * hp.head_dim, hp.head_dim};
}

// Where rank r cuts `name`; nullopt: the tensor stays whole.
std::optional<Cut> cut_of(const HParams& hp, std::string_view name, int rank, int ranks) {
  if (ranks == 1) return std::nullopt;
  if (name == "output.weight" && vocab_split(hp, ranks)) {
    return share(1, hp.n_vocab, rank, ranks);
  }
  const std::string_view w = layer_part(name);
  if (one_of(w, {"attn_q.weight", "attn_q.bias", "attn_output.weight"})) {
    return share(w == "attn_q.weight" ? 1 : 0, hp.n_head, rank, ranks, hp.head_dim);
  }
  if (w == "attn_sinks.weight") return share(0, hp.n_head, rank, ranks);
  if (one_of(w, {"attn_k.weight", "attn_v.weight"})) return kv_cut(hp, 1, rank, ranks);
  if (one_of(w, {"attn_k.bias", "attn_v.bias"})) return kv_cut(hp, 0, rank, ranks);
  if (one_of(w, {"ffn_gate.weight", "ffn_up.weight"})) return share(1, hp.n_ff, rank, ranks);
  if (w == "ffn_down.weight") return share(0, hp.n_ff, rank, ranks);
  if (one_of(w, {"ffn_gate_exps.weight", "ffn_up_exps.weight"})) {
    return share(1, hp.n_ff_exp, rank, ranks);
  }
  if (one_of(w, {"ffn_down_exps.weight", "ffn_gate_exps.bias", "ffn_up_exps.bias"})) {
    return share(0, hp.n_ff_exp, rank, ranks);
  }
  return std::nullopt;
}

// Rows [first, first + count) of each of the tensor's groups of dims[1]
// rows: a view when there is one group, else a copy.
Status cut_rows(const WeightView& v, const Cut& c, Weights& out) {
  std::vector<int64_t> dims = v.dims;
  dims[1] = c.count;
  const size_t row = v.row_bytes();
  const int64_t groups = v.rows() / v.dims[1];
  if (groups == 1) {
    return out.add_view({v.name, v.type, dims, v.data + c.first * row, c.count * row});
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(groups * c.count) * row);
  for (int64_t g = 0; g < groups; ++g) {
    std::memcpy(bytes.data() + g * c.count * row, v.data + (g * v.dims[1] + c.first) * row,
                c.count * row);
  }
  return out.add_derived(v.name, v.type, dims, std::move(bytes));
}

Status reencode_elements(const WeightView& v, const Cut& c, Weights& out);

// Elements [first, first + count) of every row: the row's bytes where the cut
// falls on the tensor's blocks, else re-encoded (reencode_elements).
Status cut_elements(const WeightView& v, const Cut& c, Weights& out) {
  const quant::TypeTraits& t = quant::type_traits(v.type);
  std::vector<int64_t> dims = v.dims;
  dims[0] = c.count;
  const int64_t rows = v.rows();
  if (c.first % t.block_size == 0 && c.count % t.block_size == 0) {
    const size_t off = static_cast<size_t>(c.first / t.block_size) * t.type_size;
    const size_t len = static_cast<size_t>(c.count / t.block_size) * t.type_size;
    if (rows == 1) return out.add_view({v.name, v.type, dims, v.data + off, len});
    std::vector<uint8_t> bytes(static_cast<size_t>(rows) * len);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(bytes.data() + r * len, v.data + r * v.row_bytes() + off, len);
    }
    return out.add_derived(v.name, v.type, dims, std::move(bytes));
  }
  return reencode_elements(v, c, out);
}

// A cut inside the tensor's blocks: each row's part decoded and encoded
// again as Q8_0 (32-value blocks, within 1/254 of a block's largest value of
// the decoded weights, and a quarter of F32's bytes) where the cut falls on
// 32-value boundaries, else kept as F32.
Status reencode_elements(const WeightView& v, const Cut& c, Weights& out) {
  std::vector<int64_t> dims = v.dims;
  dims[0] = c.count;
  const quant::TensorType to =
      c.first % 32 == 0 && c.count % 32 == 0 ? quant::TensorType::Q8_0 : quant::TensorType::F32;
  MINFER_ASSIGN_OR_RETURN(const uint64_t part_bytes, quant::row_bytes(to, c.count));
  std::vector<float> row(static_cast<size_t>(v.row_length()));
  std::vector<uint8_t> bytes(static_cast<size_t>(v.rows()) * part_bytes);
  for (int64_t r = 0; r < v.rows(); ++r) {
    Status s =
        quant::dequantize_row(v.type, v.data + r * v.row_bytes(), row.data(), v.row_length());
    if (s)
      s = quant::quantize_row(to, row.data() + c.first, bytes.data() + r * part_bytes, c.count);
    if (!s) return Status::invalid_argument("cannot split '" + v.name + "': " + s.message());
  }
  return out.add_derived(v.name, to, dims, std::move(bytes));
}

Status add_part(const WeightView& v, const std::optional<Cut>& c, Weights& out) {
  if (!c) return out.add_view(v);
  const size_t dim = static_cast<size_t>(c->dim);
  if (v.dims.size() <= dim || c->first + c->count > v.dims[dim]) {
    return Status::invalid_argument("weight '" + v.name + "' has no dimension " +
                                    std::to_string(dim) + " to cut at " +
                                    std::to_string(c->first + c->count));
  }
  return dim == 1 ? cut_rows(v, *c, out) : cut_elements(v, *c, out);
}

Status divides(int64_t n, int ranks, const char* what) {
  if (n % ranks == 0) return Status::ok();
  return Status::invalid_argument("tensor parallelism over " + std::to_string(ranks) +
                                  " ranks needs the " + what + " (" + std::to_string(n) +
                                  ") to divide by " + std::to_string(ranks));
}

}  // namespace

bool input_split(std::string_view weight) {
  return one_of(layer_part(weight),
                {"attn_output.weight", "ffn_down.weight", "ffn_down_exps.weight"});
}

bool vocab_split(const HParams& hp, int ranks) {
  return ranks > 1 && hp.n_vocab % ranks == 0;
}

Status check_split(const HParams& hp, int ranks) {
  if (ranks < 1) {
    return Status::invalid_argument("tensor parallelism needs at least 1 rank, not " +
                                    std::to_string(ranks));
  }
  MINFER_RETURN_IF_ERROR(divides(hp.n_head, ranks, "query heads"));
  if (hp.n_head_kv >= ranks) {
    MINFER_RETURN_IF_ERROR(divides(hp.n_head_kv, ranks, "KV heads"));
  } else {
    MINFER_RETURN_IF_ERROR(divides(ranks, static_cast<int>(hp.n_head_kv), "ranks over KV heads"));
  }
  if (hp.n_ff > 0) MINFER_RETURN_IF_ERROR(divides(hp.n_ff, ranks, "FFN width"));
  if (hp.is_moe()) MINFER_RETURN_IF_ERROR(divides(hp.n_ff_exp, ranks, "expert FFN width"));
  return Status::ok();
}

Result<RankModel> split_for_rank(const HParams& hp, const Weights& weights, int rank, int ranks) {
  MINFER_RETURN_IF_ERROR(check_split(hp, ranks));
  if (rank < 0 || rank >= ranks) {
    return Status::invalid_argument("rank " + std::to_string(rank) + " of " +
                                    std::to_string(ranks));
  }
  RankModel m{hp, Weights()};
  m.hp.n_head = hp.n_head / ranks;
  m.hp.n_head_kv = std::max<int64_t>(1, hp.n_head_kv / ranks);
  m.hp.n_ff = hp.n_ff / ranks;
  m.hp.n_ff_exp = hp.n_ff_exp / ranks;
  for (const WeightView& v : weights.all()) {
    MINFER_RETURN_IF_ERROR(add_part(v, cut_of(hp, v.name, rank, ranks), m.weights));
  }
  if (hp.tied_output && vocab_split(hp, ranks)) {  // the output's rows, apart from the embedding's
    MINFER_ASSIGN_OR_RETURN(const WeightView* emb, weights.require("token_embd.weight"));
    WeightView out = *emb;
    out.name = "output.weight";
    MINFER_RETURN_IF_ERROR(add_part(out, share(1, hp.n_vocab, rank, ranks), m.weights));
    m.hp.tied_output = false;
  }
  return m;
}

}  // namespace minfer::model
