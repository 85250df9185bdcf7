#include "tests/support/fixtures.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace rwkvd::test {

std::filesystem::path fixtures_root() {
  if (const char* env = std::getenv("RWKVD_FIXTURES"); env != nullptr && *env != '\0') {
    return env;
  }
  return RWKVD_DEFAULT_FIXTURES;
}

bool fixtures_required() {
  const char* env = std::getenv("RWKVD_REQUIRE_FIXTURES");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

std::filesystem::path binary_dir() { return RWKVD_BINARY_DIR; }

std::vector<float> read_f32_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> out(size / sizeof(float));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
  return out;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> manifest_tokens(const std::string& file) {
  std::ifstream in(fixtures_root() / "rwkv7" / "manifest.json");
  if (!in) throw std::runtime_error("cannot open the fixtures manifest");
  const auto manifest = nlohmann::json::parse(in);
  for (const auto& f : manifest.at("files")) {
    if (f.at("file") == file) return f.at("tokens").get<std::vector<int32_t>>();
  }
  throw std::runtime_error("manifest has no entry for " + file);
}

}  // namespace rwkvd::test
