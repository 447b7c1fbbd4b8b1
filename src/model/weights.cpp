#include "model/weights.h"

#include <cstring>

#include "gguf/file.h"

namespace minfer::model {

Weights Weights::from_file(const gguf::File& file) {
  Weights w;
  for (const auto& t : file.tensors()) {
    w.views_.push_back({t.name, t.type, t.dims, t.data, static_cast<size_t>(t.nbytes)});
  }
  w.reindex();
  return w;
}

void Weights::reindex() {
  index_.clear();
  for (size_t i = 0; i < views_.size(); ++i) index_[views_[i].name] = i;
}

const WeightView* Weights::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &views_[it->second];
}

Result<const WeightView*> Weights::require(std::string_view name) const {
  const WeightView* v = find(name);
  if (v == nullptr) return Status::invalid_argument("weight '" + std::string(name) + "' not found");
  return v;
}

Status Weights::add_view(WeightView view) {
  if (find(view.name) != nullptr) {
    return Status::invalid_argument("weight '" + view.name + "' already exists");
  }
  views_.push_back(std::move(view));
  index_[views_.back().name] = views_.size() - 1;
  return Status::ok();
}

Status Weights::add_derived(std::string name, quant::TensorType type, std::vector<int64_t> dims,
                            std::vector<uint8_t> bytes) {
  if (find(name) != nullptr)
    return Status::invalid_argument("weight '" + name + "' already exists");
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  const auto& storage = *owned_.back();
  views_.push_back({std::move(name), type, std::move(dims), storage.data(), storage.size()});
  reindex();
  return Status::ok();
}

Status Weights::concat_rows(const std::string& name, const std::vector<std::string>& parts) {
  std::vector<uint8_t> bytes;
  int64_t rows = 0;
  const WeightView* first = nullptr;
  for (const auto& p : parts) {
    MINFER_ASSIGN_OR_RETURN(const WeightView* v, require(p));
    if (first == nullptr) first = v;
    if (v->type != first->type || v->row_length() != first->row_length() || v->dims.size() != 2) {
      return Status::invalid_argument("cannot concatenate '" + p + "' with '" + first->name +
                                      "': type or row length differs");
    }
    bytes.insert(bytes.end(), v->data, v->data + v->nbytes);
    rows += v->rows();
  }
  if (first == nullptr) return Status::invalid_argument("concat_rows('" + name + "'): no parts");
  return add_derived(name, first->type, {first->row_length(), rows}, std::move(bytes));
}

}  // namespace minfer::model
