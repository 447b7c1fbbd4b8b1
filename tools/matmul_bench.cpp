// Microbenchmark of one CPU matmul: the file-row kernels (matmul()) or the
// packed copy (packed_matmul()) for one weight type and shape, with weights
// either cycled through copies that together exceed the last-level cache
// (as in a decode step, where every weight comes from DRAM) or one copy that
// stays cached. Prints the best of 30 calls and the weight bytes streamed per
// second. The numbers of docs/PERFORMANCE.md ("Packed decode on AVX-512
// hosts") come from it. Random weights quantized by the reference quantizer.
//
//   minfer_matmul_bench TYPE ROWS ROW_LEN [--threads N] [--tokens N]
//                       [--packed] [--cached]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_packed.h"
#include "quant/reference.h"
#include "quant/tensor_type.h"

namespace {

using minfer::Status;
using minfer::ThreadPool;
using namespace minfer::cpu;
using minfer::quant::TensorType;

constexpr size_t kStreamBytes = size_t{400} << 20;  // well past a 32 MiB L3

struct Args {
  TensorType type = TensorType::Q4_0;
  int64_t rows = 0, row_len = 0, tokens = 1;
  int threads = 1;
  bool packed = false, cached = false;
};

bool parse(int argc, char** argv, Args& a) {
  if (argc < 4) return false;
  const auto t = minfer::quant::parse_tensor_type(argv[1]);
  if (!t) return false;
  a.type = *t;
  a.rows = std::atoll(argv[2]);
  a.row_len = std::atoll(argv[3]);
  for (int i = 4; i < argc; ++i) {
    const std::string_view f = argv[i];
    if (f == "--packed") {
      a.packed = true;
    } else if (f == "--cached") {
      a.cached = true;
    } else if ((f == "--threads" || f == "--tokens") && i + 1 < argc) {
      if (f == "--threads") {
        a.threads = std::atoi(argv[++i]);
      } else {
        a.tokens = std::atoll(argv[++i]);
      }
    } else {
      return false;
    }
  }
  return a.rows > 0 && a.row_len > 0 && a.tokens > 0 && a.threads > 0;
}

int fail(const Status& s) {
  std::fprintf(stderr, "minfer_matmul_bench: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: minfer_matmul_bench TYPE ROWS ROW_LEN [--threads N] [--tokens N] "
                 "[--packed] [--cached]\n");
    return 2;
  }
  const auto rb = minfer::quant::row_bytes(a.type, a.row_len);
  if (!rb) return fail(rb.status());
  std::vector<uint8_t> w(*rb * static_cast<size_t>(a.rows));
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> row(static_cast<size_t>(a.row_len));
  for (int64_t r = 0; r < a.rows; ++r) {
    for (float& v : row) v = normal(gen);
    const Status s = minfer::quant::quantize_row(a.type, row.data(), w.data() + r * *rb, a.row_len);
    if (!s) return fail(s);
  }
  const size_t copies = a.cached ? 1 : std::max<size_t>(1, kStreamBytes / w.size());
  std::vector<std::vector<uint8_t>> data(copies, w);
  ThreadPool pool(a.threads);
  std::vector<PackedWeight> packed;
  for (const auto& d : data) {
    if (!a.packed) continue;
    auto p = pack_weight({a.type, a.rows, a.row_len, d.data(), 0}, pool);
    if (!p) return fail(p.status());
    packed.push_back(std::move(*p));
  }
  std::vector<float> x(static_cast<size_t>(a.row_len * a.tokens)),
      y(static_cast<size_t>(a.rows * a.tokens));
  for (float& v : x) v = normal(gen);
  std::vector<uint8_t> scratch;
  double best = 1e30;
  for (int it = 0; it < 30; ++it) {
    const size_t c = static_cast<size_t>(it) % copies;
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = a.packed
                         ? packed_matmul(packed[c], x.data(), a.tokens, y.data(), pool, scratch)
                         : matmul({a.type, a.rows, a.row_len, data[c].data(), 0}, x.data(),
                                  a.tokens, y.data(), pool, scratch);
    const auto t1 = std::chrono::steady_clock::now();
    if (!s) return fail(s);
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("%s [%lld x %lld] x %lld tokens, %d threads, %s, %s: %.3f ms, %.1f GB/s of weights\n",
              argv[1], static_cast<long long>(a.rows), static_cast<long long>(a.row_len),
              static_cast<long long>(a.tokens), a.threads, a.packed ? "packed" : "file rows",
              a.cached ? "cached" : "from DRAM", best * 1e3,
              static_cast<double>(w.size()) / best / 1e9);
  return 0;
}
