#include "runtime/rank_messages.h"

#include <cstring>
#include <string>
#include <type_traits>

namespace minfer::runtime {
namespace {

// Both ends are the same build (the worker command of the same binary), so
// the plain structs travel as their bytes; the tag and version catch a
// message of another kind or build.
static_assert(std::is_trivially_copyable_v<model::GraphParams>);
static_assert(std::is_trivially_copyable_v<RankSetup>);

constexpr uint32_t kSetupTag = 0x5053544d;    // "MTSP"
constexpr uint32_t kForwardTag = 0x5746544d;  // "MTFW"
constexpr uint32_t kVersion = 1;

class Writer {
 public:
  explicit Writer(uint32_t tag) {
    put(tag);
    put(kVersion);
  }
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_array(std::span<const int32_t> a) {
    put(static_cast<uint64_t>(a.size()));
    const auto* p = reinterpret_cast<const std::byte*>(a.data());
    out_.insert(out_.end(), p, p + a.size_bytes());
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, uint32_t tag, const char* what) : in_(in), what_(what) {
    uint32_t got_tag = 0, version = 0;
    if (!get(got_tag) || !get(version) || got_tag != tag || version != kVersion) {
      status_ = Status::invalid_argument(std::string("tensor-parallel message is not a ") + what +
                                         " of this build");
    }
  }
  template <typename T>
  bool get(T& v) {
    if (!take(&v, sizeof(T))) return false;
    return true;
  }
  bool get_array(std::vector<int32_t>& a) {
    uint64_t n = 0;
    if (!get(n) || n > (in_.size() - at_) / sizeof(int32_t)) return fail();
    a.resize(static_cast<size_t>(n));
    return take(a.data(), a.size() * sizeof(int32_t));
  }
  Status finish() {
    if (status_ && at_ != in_.size()) fail();
    return status_;
  }

 private:
  bool take(void* dst, size_t n) {
    if (!status_ || n > in_.size() - at_) return fail();
    std::memcpy(dst, in_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool fail() {
    if (status_) {
      status_ = Status::invalid_argument(std::string("tensor-parallel ") + what_ + " of " +
                                         std::to_string(in_.size()) + " bytes is cut short");
    }
    return false;
  }

  std::span<const std::byte> in_;
  const char* what_;
  size_t at_ = 0;
  Status status_ = Status::ok();
};

}  // namespace

std::vector<std::byte> encode_setup(const RankSetup& setup) {
  Writer w(kSetupTag);
  w.put(setup);
  return w.take();
}

Result<RankSetup> decode_setup(std::span<const std::byte> bytes) {
  Reader r(bytes, kSetupTag, "setup");
  RankSetup setup;
  r.get(setup);
  MINFER_RETURN_IF_ERROR(r.finish());
  return setup;
}

std::vector<std::byte> encode_forward(const model::GraphParams& params,
                                      const graph::ForwardInputs& inputs) {
  Writer w(kForwardTag);
  w.put(params);
  for (std::span<const int32_t> a : {inputs.tokens, inputs.positions, inputs.cells,
                                     inputs.seq_slots, inputs.page_table, inputs.output_rows}) {
    w.put_array(a);
  }
  return w.take();
}

Result<RankForward> decode_forward(std::span<const std::byte> bytes) {
  Reader r(bytes, kForwardTag, "forward request");
  RankForward f;
  r.get(f.params);
  for (std::vector<int32_t>* a :
       {&f.tokens, &f.positions, &f.cells, &f.seq_slots, &f.page_table, &f.output_rows}) {
    r.get_array(*a);
  }
  MINFER_RETURN_IF_ERROR(r.finish());
  return f;
}

}  // namespace minfer::runtime
