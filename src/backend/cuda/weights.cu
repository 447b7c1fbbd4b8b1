#include "backend/cuda/weights.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda/kernels.h"
#include "base/log.h"
#include "base/progress.h"

namespace minfer::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kHeadroom = 512 * kMiB;  // left free for activations and the KV cache
// Two staging buffers of at most this size; a smaller model gets two halves of itself,
// so the CPU fills one while the other is copied even then.
constexpr size_t kStagingChunk = 64 * kMiB;
constexpr size_t kBarMinBytes = 64 * kMiB;  // smaller uploads finish before a bar is worth it

size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

std::string size_text(size_t bytes) {
  return bytes >= kMiB && bytes % kMiB == 0 ? std::to_string(bytes / kMiB) + " MiB"
                                            : std::to_string(bytes / 1024) + " KiB";
}

// A tensor's place in the arena: [offset, offset + view->nbytes), padding up to the next
// 256-byte boundary after it.
struct Placement {
  const model::WeightView* view = nullptr;
  size_t offset = 0;
};

// "tensor 'a'" or "tensors 'a' .. 'b'": the tensors with bytes in arena range [begin, end).
std::string tensors_in(const std::vector<Placement>& placements, size_t begin, size_t end) {
  const Placement* first = nullptr;
  const Placement* last = nullptr;
  for (const Placement& p : placements) {
    if (p.offset + p.view->nbytes <= begin || p.view->nbytes == 0) continue;
    if (p.offset >= end) break;
    if (first == nullptr) first = &p;
    last = &p;
  }
  if (first == nullptr) {
    return "arena bytes " + std::to_string(begin) + ".." + std::to_string(end);
  }
  if (first == last) return "tensor '" + first->view->name + "'";
  return "tensors '" + first->view->name + "' .. '" + last->view->name + "'";
}

// Writes arena bytes [begin, end) to `dst`: tensor data, zeros in the padding. `next` is
// the first placement that may reach into the range; it is moved past those that end
// inside it, so consecutive ranges walk the table once.
void fill_chunk(const std::vector<Placement>& placements, size_t& next, size_t begin, size_t end,
                uint8_t* dst) {
  size_t pos = begin;
  while (pos < end) {
    if (next == placements.size()) {
      std::memset(dst + (pos - begin), 0, end - pos);
      return;
    }
    const Placement& p = placements[next];
    const size_t stop = p.offset + p.view->nbytes;
    if (pos < p.offset) {
      const size_t n = std::min(p.offset, end) - pos;
      std::memset(dst + (pos - begin), 0, n);
      pos += n;
      continue;
    }
    const size_t n = std::min(stop, end) - pos;
    if (n > 0) std::memcpy(dst + (pos - begin), p.view->data + (pos - p.offset), n);
    pos += n;
    if (pos == stop) ++next;
  }
}

// Two page-locked buffers, each with the event that says its last copy finished, and
// the stream the copies run on.
struct Staging {
  size_t chunk = 0;
  PinnedBuffer buffer[2];
  Event copied[2];
  Stream stream;
};

// Pinned memory may be refused (locked-memory limits, containers): then the result is
// an error and `reason` says why, and the upload takes the pageable path. A stream or
// event that cannot be created is an error with `reason` left empty.
Result<Staging> make_staging(size_t total, std::string& reason) {
  Staging s;
  s.chunk = std::min(kStagingChunk, std::max(kAlign, align_up((total + 1) / 2)));
  for (int i = 0; i < 2; ++i) {
    auto buf = PinnedBuffer::allocate(s.chunk);
    if (!buf.is_ok()) {
      reason = buf.status().message();
      return buf.status();
    }
    s.buffer[i] = std::move(buf.value());
    MINFER_ASSIGN_OR_RETURN(s.copied[i], Event::create());
  }
  MINFER_ASSIGN_OR_RETURN(s.stream, Stream::create());
  return Result<Staging>(std::move(s));
}

// Arena bytes [0, total) in chunks: the CPU copies chunk i+1 into one staging buffer
// while the GPU copies chunk i out of the other; a buffer is refilled only after the
// event recorded behind its previous copy has completed.
Status upload_staged(const std::vector<Placement>& placements, uint8_t* base, size_t total,
                     Staging& s, ProgressBar& bar) {
  size_t next = 0;
  size_t in_flight[2][2] = {{0, 0}, {0, 0}};  // arena range of each buffer's last copy
  bool busy[2] = {false, false};
  for (size_t begin = 0, i = 0; begin < total; begin += s.chunk, ++i) {
    const size_t end = std::min(begin + s.chunk, total);
    const int b = static_cast<int>(i % 2);
    if (busy[b]) {
      const Status done = [&]() -> Status {
        MINFER_CUDA_CHECK(cudaEventSynchronize(s.copied[b].get()));
        return Status::ok();
      }();
      if (!done) {
        return done.with_context("uploading " +
                                 tensors_in(placements, in_flight[b][0], in_flight[b][1]));
      }
    }
    auto* staging = static_cast<uint8_t*>(s.buffer[b].data());
    fill_chunk(placements, next, begin, end, staging);
    const Status sent = [&]() -> Status {
      MINFER_CUDA_CHECK(cudaMemcpyAsync(base + begin, staging, end - begin, cudaMemcpyHostToDevice,
                                        s.stream.get()));
      MINFER_CUDA_CHECK(cudaEventRecord(s.copied[b].get(), s.stream.get()));
      return Status::ok();
    }();
    if (!sent) return sent.with_context("uploading " + tensors_in(placements, begin, end));
    busy[b] = true;
    in_flight[b][0] = begin;
    in_flight[b][1] = end;
    bar.update(end);
  }
  const Status done = [&]() -> Status {
    MINFER_CUDA_CHECK(cudaStreamSynchronize(s.stream.get()));
    return Status::ok();
  }();
  if (!done) {
    return done.with_context(
        "uploading " +
        tensors_in(placements, total > 2 * s.chunk ? total - 2 * s.chunk : 0, total));
  }
  return Status::ok();
}

// The fallback: one synchronous pageable copy per tensor.
Status upload_pageable(const std::vector<Placement>& placements, uint8_t* base, ProgressBar& bar) {
  for (const Placement& p : placements) {
    const Status st = [&]() -> Status {
      MINFER_CUDA_CHECK(
          cudaMemcpy(base + p.offset, p.view->data, p.view->nbytes, cudaMemcpyHostToDevice));
      return Status::ok();
    }();
    if (!st) return st.with_context("uploading tensor '" + p.view->name + "'");
    bar.update(p.offset + p.view->nbytes);
  }
  return Status::ok();
}

// Copies every tensor to its place in the arena at `base` (`total` bytes), with the bar
// on a terminal; `how` says which path was taken, for the summary line.
Status upload(const std::vector<Placement>& placements, uint8_t* base, size_t total,
              std::string& how) {
  ProgressBar bar(stderr, ProgressBar::shown_on(stderr, total, kBarMinBytes),
                  "minfer: CUDA: uploading weights", total);
  std::string pinned_refused;
  Result<Staging> staging = make_staging(total, pinned_refused);
  if (staging.is_ok()) {
    Staging& s = staging.value();
    const Status st = upload_staged(placements, base, total, s, bar);
    if (!st) {
      // Copies may still be in flight out of the staging buffers about to be freed.
      (void)cudaStreamSynchronize(s.stream.get());
      return st;
    }
    how = "pinned staging 2 x " + size_text(s.chunk);
  } else if (!pinned_refused.empty()) {
    MINFER_RETURN_IF_ERROR(upload_pageable(placements, base, bar));
    how = "pageable cudaMemcpy, no pinned staging: " + pinned_refused;
  } else {
    return staging.status();
  }
  bar.finish();
  return Status::ok();
}

}  // namespace

const DeviceWeight* DeviceWeights::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &it->second;
}

bool DeviceWeights::made_from(const model::Weights& weights) const {
  if (weights.all().size() != host_data_.size()) return false;
  for (size_t i = 0; i < host_data_.size(); ++i) {
    if (weights.all()[i].data != host_data_[i]) return false;
  }
  return true;
}

Result<std::shared_ptr<const DeviceWeights>> DeviceWeights::get(const model::Weights& weights) {
  static std::mutex mu;
  static std::map<const model::Weights*, std::weak_ptr<const DeviceWeights>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(&weights); it != cache.end()) {
    auto live = it->second.lock();
    if (live && live->made_from(weights)) return live;
  }
  size_t total = 0;
  std::vector<Placement> placements;
  placements.reserve(weights.all().size());
  for (const model::WeightView& v : weights.all()) {
    if (!has_decoder(v.type)) {
      return Status::unimplemented("tensor '" + v.name + "' has type " +
                                   std::string(quant::type_traits(v.type).name) +
                                   ", which has no CUDA kernel");
    }
    // Rows of a length the kernels cannot take (not a multiple of 32) still
    // go up: the op table leaves their nodes to the CPU (op_support.cu).
    placements.push_back({&v, total});
    total += align_up(v.nbytes);
  }
  size_t free_b = 0, total_b = 0;
  MINFER_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (total + kHeadroom > free_b) {
    return Status::resource_exhausted("out of device memory: the weights need " +
                                      std::to_string(total / kMiB) + " MiB (+" +
                                      std::to_string(kHeadroom / kMiB) + " MiB headroom), " +
                                      std::to_string(free_b / kMiB) + " MiB free");
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto dw = std::make_shared<DeviceWeights>();
  MINFER_ASSIGN_OR_RETURN(dw->arena_, DeviceBuffer::allocate(total));
  auto* base = static_cast<uint8_t*>(dw->arena_.data());
  std::string how;
  if (total > 0) MINFER_RETURN_IF_ERROR(upload(placements, base, total, how));
  for (const Placement& p : placements) {
    const model::WeightView& v = *p.view;
    DeviceWeight w;
    w.type = v.type;
    w.rows = v.rows();
    w.row_len = v.row_length();
    w.row_bytes = v.row_bytes();
    w.data = base + p.offset;
    dw->index_[v.name] = w;
    dw->host_data_.push_back(v.data);
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  if (total > 0) {
    char line[160];
    std::snprintf(
        line, sizeof(line), "CUDA: uploaded %zu tensors (%.1f MiB) in %.0f ms, %.2f GB/s (%s)",
        weights.all().size(), static_cast<double>(total) / kMiB, dt.count() * 1e3,
        dt.count() > 0 ? static_cast<double>(total) / 1e9 / dt.count() : 0.0, how.c_str());
    log_info(line);
  }
  cache[&weights] = dw;
  return std::shared_ptr<const DeviceWeights>(std::move(dw));
}

}  // namespace minfer::cuda
