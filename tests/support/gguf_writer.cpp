#include "tests/support/gguf_writer.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace rwkvd::test {
namespace {
constexpr uint32_t kU32 = 4, kI32 = 5, kF32 = 6, kString = 8, kArray = 9;
}  // namespace

template <typename T>
void GgufWriter::put(T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian host, like the reader
  kv_.append(b, sizeof(T));
}

void GgufWriter::put_string(std::string_view s) {
  put<uint64_t>(s.size());
  kv_.append(s);
}

void GgufWriter::begin(std::string_view key, uint32_t type) {
  put_string(key);
  put<uint32_t>(type);
  ++n_kv_;
}

void GgufWriter::add_string(std::string_view key, std::string_view value) {
  begin(key, kString);
  put_string(value);
}

void GgufWriter::add_u32(std::string_view key, uint32_t value) {
  begin(key, kU32);
  put<uint32_t>(value);
}

void GgufWriter::add_string_array(std::string_view key, const std::vector<std::string>& values) {
  begin(key, kArray);
  put<uint32_t>(kString);
  put<uint64_t>(values.size());
  for (const auto& v : values) put_string(v);
}

void GgufWriter::add_i32_array(std::string_view key, const std::vector<int32_t>& values) {
  begin(key, kArray);
  put<uint32_t>(kI32);
  put<uint64_t>(values.size());
  for (int32_t v : values) put<int32_t>(v);
}

void GgufWriter::add_f32_array(std::string_view key, const std::vector<float>& values) {
  begin(key, kArray);
  put<uint32_t>(kF32);
  put<uint64_t>(values.size());
  for (float v : values) put<float>(v);
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::string header = "GGUF";
  auto append = [&](auto v) { header.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  append(uint32_t{3});      // version
  append(uint64_t{0});      // tensor count
  append(uint64_t{n_kv_});  // metadata count
  std::ofstream out(path, std::ios::binary);
  out << header << kv_;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::filesystem::path make_temp_dir(std::string_view tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("rwkvd-test-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" +
                    std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace rwkvd::test
