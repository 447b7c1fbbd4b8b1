#include "gguf/gguf_testutil.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace minfer::gguf::testing {
namespace {

uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

constexpr std::array<uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

void compress(std::array<uint32_t, 8>& h, const uint8_t* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
           (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                        kK[static_cast<size_t>(i)] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void escape_into(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  out += '"';
}

}  // namespace

std::string sha256_hex(const uint8_t* data, size_t n) {
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t full = n / 64 * 64;
  for (size_t i = 0; i < full; i += 64) compress(h, data + i);
  uint8_t tail[128] = {};
  const size_t rest = n - full;
  if (rest) std::memcpy(tail, data + full, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 9 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  for (size_t i = 0; i < tail_len; i += 64) compress(h, tail + i);
  std::string out;
  char buf[12];
  for (uint32_t x : h) {
    std::snprintf(buf, sizeof(buf), "%08x", x);
    out += buf;
  }
  return out;
}

std::string canonical_value(const Value& v) {
  std::string out;
  char buf[32];
  switch (v.type()) {
    case ValueType::F32: {
      const float f = static_cast<float>(v.raw_float());
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      std::snprintf(buf, sizeof(buf), "0x%08x", bits);
      return buf;
    }
    case ValueType::F64: {
      const double d = v.raw_float();
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(bits));
      return buf;
    }
    case ValueType::BOOL:
      return v.raw_bits() ? "true" : "false";
    case ValueType::STRING:
      escape_into(out, *v.to_string());
      return out;
    case ValueType::ARRAY:
      out = "array<" + std::string(value_type_name(v.array_type())) + ">[";
      for (size_t i = 0; i < v.array_size(); ++i) {
        if (i) out += ',';
        out += canonical_value(v.array()[i]);
      }
      return out + "]";
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return std::to_string(static_cast<int64_t>(v.raw_bits()));
    default:
      return std::to_string(v.raw_bits());
  }
}

std::string canonical_dump(const File& f, size_t part) {
  std::string out = "version " + std::to_string(f.version()) + "\n";
  out += "alignment " + std::to_string(f.alignment()) + "\n";
  out += "data_offset " + std::to_string(f.data_offset(part)) + "\n";
  for (const auto& [key, value] : f.metadata()) {
    out += "kv ";
    escape_into(out, key);
    out += " " + std::string(value_type_name(value.type())) + " " + canonical_value(value) + "\n";
  }
  for (const TensorInfo& t : f.tensors()) {
    if (t.part != part) continue;
    out += "tensor ";
    escape_into(out, t.name);
    out += " " + std::string(quant::type_name(t.type)) + " [";
    for (size_t i = 0; i < t.dims.size(); ++i) out += (i ? "," : "") + std::to_string(t.dims[i]);
    out += "] offset=" + std::to_string(t.offset) +
           " file_offset=" + std::to_string(t.file_offset) + " nbytes=" + std::to_string(t.nbytes) +
           " sha256=" + sha256_hex(t.data, t.nbytes) + "\n";
  }
  return out;
}

Writer::Fill pattern_fill(uint32_t seed) {
  return [seed](std::span<uint8_t> out) {
    std::mt19937 rng(seed);
    for (auto& b : out) b = static_cast<uint8_t>(rng());
    return Status::ok();
  };
}

Writer sample_writer() {
  using quant::TensorType;
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set("t.u8", Value::u8(200));
  w.set("t.i8", Value::i8(-100));
  w.set("t.u16", Value::u16(60000));
  w.set("t.i16", Value::i16(-30000));
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_f32("t.f32", 0.15625f);
  w.set_bool("t.bool", true);
  w.set_string("t.string", "h\xc3\xa9llo \"world\"\n");
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set("t.i64", Value::i64(-9000000000000000000ll));
  w.set("t.f64", Value::f64(-2.5e-300));
  w.set_string_array("t.strings", {"a", "", "\xe2\x96\x81the"});
  w.set_f32_array("t.f32s", {1.0f, -0.0f, 3.5f});
  w.set_i32_array("t.i32s", {});
  w.set("t.nested",
        Value::array(ValueType::ARRAY, {Value::array(ValueType::U8, {Value::u8(1), Value::u8(2)}),
                                        Value::array(ValueType::STRING, {Value::string("x")}),
                                        Value::array(ValueType::I64, {})}));
  w.set("t.bools", Value::array(ValueType::BOOL, {Value::boolean(false), Value::boolean(true)}));
  auto check = [](Status s) {
    if (!s.is_ok()) std::fprintf(stderr, "sample_writer: %s\n", s.message().c_str());
  };
  check(w.add_tensor("tok_embd.weight", TensorType::Q4_K, {256, 3}, pattern_fill(1)));
  check(w.add_tensor("norm.weight", TensorType::F32, {7}, pattern_fill(2)));
  check(w.add_tensor("a.f16", TensorType::F16, {5, 2, 1}, pattern_fill(3)));
  check(w.add_tensor("a.q8", TensorType::Q8_0, {64, 2, 1, 2}, pattern_fill(4)));
  check(w.add_tensor("a.bf16", TensorType::BF16, {3}, pattern_fill(5)));
  check(w.add_tensor("a.i32", TensorType::I32, {3, 3}, pattern_fill(6)));
  return w;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "minfer_gguf_XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char* p = ::mkdtemp(buf.data());
  path_ = p ? p : tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> fuzz_seeds() {
  using quant::TensorType;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  auto add = [&](std::string name, const Writer& w) {
    auto bytes = w.to_bytes();
    if (bytes.is_ok()) out.emplace_back(std::move(name), std::move(bytes).value());
  };
  add("sample_v3.gguf", sample_writer());
  Writer v2 = sample_writer();
  v2.set_version(2);
  v2.set_u32("general.alignment", 64);
  add("sample_v2_align64.gguf", v2);
  Writer empty;
  add("empty.gguf", empty);
  Writer deep;
  Value v = Value::array(ValueType::I16, {Value::i16(-1)});
  for (int i = 0; i < 5; ++i) v = Value::array(ValueType::ARRAY, {v, v});
  deep.set("deep", v);
  (void)deep.add_tensor("t", TensorType::Q8_0, {32}, pattern_fill(7));
  add("nested_arrays.gguf", deep);
  Writer split;
  split.set("split.no", Value::u16(0));
  split.set("split.count", Value::u16(1));
  split.set_i32("split.tensors.count", 2);
  (void)split.add_tensor("x", TensorType::Q6_K, {256}, pattern_fill(8));
  (void)split.add_tensor("y", TensorType::IQ4_NL, {32, 2}, pattern_fill(9));
  add("split_keys.gguf", split);
  return out;
}

}  // namespace minfer::gguf::testing
