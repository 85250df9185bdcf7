#pragma once
// A minimal GGUF v3 writer for tests: metadata only, no tensors. Enough to build vocab-only
// files (and malformed variants of them) without shipping binary fixtures.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::test {

class GgufWriter {
 public:
  void add_string(std::string_view key, std::string_view value);
  void add_u32(std::string_view key, uint32_t value);
  void add_string_array(std::string_view key, const std::vector<std::string>& values);
  void add_i32_array(std::string_view key, const std::vector<int32_t>& values);
  void add_f32_array(std::string_view key, const std::vector<float>& values);
  void write(const std::filesystem::path& path) const;

 private:
  void begin(std::string_view key, uint32_t type);
  template <typename T>
  void put(T v);
  void put_string(std::string_view s);

  std::string kv_;
  uint64_t n_kv_ = 0;
};

// A fresh empty directory for one test's files, removed by the caller or left in /tmp.
std::filesystem::path make_temp_dir(std::string_view tag);

}  // namespace rwkvd::test
