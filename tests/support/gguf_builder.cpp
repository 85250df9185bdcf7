#include "tests/support/gguf_builder.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace rwkvd::test {
namespace enc {
namespace {
template <typename T>
std::string pod(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
}  // namespace

std::string u8(uint8_t v) {
  return pod(v);
}
std::string u32(uint32_t v) {
  return pod(v);
}
std::string i32(int32_t v) {
  return pod(v);
}
std::string u64(uint64_t v) {
  return pod(v);
}
std::string i64(int64_t v) {
  return pod(v);
}
std::string f32(float v) {
  return pod(v);
}
std::string str(std::string_view s, std::optional<uint64_t> len) {
  return u64(len.value_or(s.size())) + std::string(s);
}
std::string array(uint32_t elem_type, uint64_t count, const std::string& elems) {
  return u32(elem_type) + u64(count) + elems;
}
std::string str_array(const std::vector<std::string>& items) {
  std::string e;
  for (const auto& s : items) e += str(s);
  return array(vt::STRING, items.size(), e);
}
std::string i32_array(const std::vector<int32_t>& items) {
  std::string e;
  for (int32_t v : items) e += i32(v);
  return array(vt::I32, items.size(), e);
}
}  // namespace enc

namespace {

// ggml block geometry by type id (elements per block, bytes per block); {0, 0} = unknown.
struct Block {
  uint64_t elems, bytes;
};
Block block_of(uint32_t type) {
  switch (type) {
    case 0:
      return {1, 4};  // f32
    case 1:
      return {1, 2};  // f16
    case 2:
      return {32, 18};  // q4_0
    case 3:
      return {32, 20};  // q4_1
    case 6:
      return {32, 22};  // q5_0
    case 7:
      return {32, 24};  // q5_1
    case 8:
      return {32, 34};  // q8_0
    case 12:
      return {256, 144};  // q4_K
    case 13:
      return {256, 176};  // q5_K
    case 14:
      return {256, 210};  // q6_K
    case 30:
      return {1, 2};  // bf16
    default:
      return {0, 0};
  }
}

constexpr uint64_t kMaxDefaultData = 64u << 20;

uint64_t round_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

GgufBuilder& GgufBuilder::add_kv(std::string key, uint32_t type, std::string value) {
  kv.push_back(RawKv{std::move(key), type, std::move(value), std::nullopt});
  return *this;
}

GgufBuilder& GgufBuilder::set_kv(std::string_view name, uint32_t type, std::string value) {
  RawKv& k = key(name);
  k.type = type;
  k.value = std::move(value);
  return *this;
}

GgufBuilder& GgufBuilder::add_tensor(std::string name, std::vector<int64_t> ne, uint32_t type) {
  RawTensor t;
  t.name = std::move(name);
  t.ne = std::move(ne);
  t.type = type;
  tensors.push_back(std::move(t));
  return *this;
}

RawTensor& GgufBuilder::tensor(std::string_view name) {
  for (auto& t : tensors) {
    if (t.name == name) return t;
  }
  throw std::out_of_range("GgufBuilder: no tensor " + std::string(name));
}

RawKv& GgufBuilder::key(std::string_view name) {
  for (auto& k : kv) {
    if (k.key == name) return k;
  }
  throw std::out_of_range("GgufBuilder: no key " + std::string(name));
}

void GgufBuilder::remove_tensor(std::string_view name) {
  std::erase_if(tensors, [&](const RawTensor& t) { return t.name == name; });
}

uint64_t GgufBuilder::tensor_bytes(const RawTensor& t) {
  const Block b = block_of(t.type);
  if (b.elems == 0) return 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t n = 1;
  for (int64_t d : t.ne) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d < 0 ? 0 : d), &n)) return kMax;
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n / b.elems, b.bytes, &bytes)) return kMax;
  return bytes;
}

std::vector<uint64_t> GgufBuilder::packed_offsets() const {
  std::vector<uint64_t> out;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    out.push_back(off);
    // Saturates rather than wraps, so absurd sizes give absurd (not small) offsets.
    uint64_t end = 0;
    if (__builtin_add_overflow(off, tensor_bytes(t), &end) || end > ~uint64_t{0} - alignment) {
      end = ~uint64_t{0} / alignment * alignment;
    }
    off = round_up(end, alignment);
  }
  return out;
}

std::string GgufBuilder::header() const {
  std::string h = enc::u32(magic) + enc::u32(version) +
                  enc::u64(n_tensors.value_or(tensors.size())) + enc::u64(n_kv.value_or(kv.size()));
  for (const auto& k : kv) h += enc::str(k.key, k.key_len) + enc::u32(k.type) + k.value;
  const auto offsets = packed_offsets();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const RawTensor& t = tensors[i];
    h += enc::str(t.name, t.name_len);
    h += enc::u32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
    for (int64_t d : t.ne) h += enc::i64(d);
    h += enc::u32(t.type);
    h += enc::u64(t.offset.value_or(offsets[i]));
  }
  return h;
}

uint64_t GgufBuilder::data_offset() const {
  return round_up(header().size(), alignment);
}

uint64_t GgufBuilder::data_size() const {
  if (data_bytes) return *data_bytes;
  uint64_t end = 0;
  const auto offsets = packed_offsets();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = tensor_bytes(tensors[i]);
    if (n > kMaxDefaultData || offsets[i] > kMaxDefaultData) return 0;
    end = std::max(end, round_up(offsets[i] + n, alignment));
  }
  return end;
}

std::string GgufBuilder::bytes() const {
  std::string out = header();
  out.resize(round_up(out.size(), alignment), '\0');
  const uint64_t n = data_size();
  out.reserve(out.size() + n);
  for (uint64_t i = 0; i < n; ++i) out.push_back(static_cast<char>(pattern_byte(i)));
  return out;
}

void GgufBuilder::write(const std::filesystem::path& path, bool sparse) const {
  if (!sparse) {
    write_bytes(path, bytes());
    return;
  }
  std::string h = header();
  h.resize(round_up(h.size(), alignment), '\0');
  write_bytes(path, h);
  std::filesystem::resize_file(path, h.size() + data_size());  // a hole, never written
}

void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("rwkvd-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace rwkvd::test
