#pragma once
// Locating the shared fixtures. A test that needs one calls RWKVD_FIXTURE: when the file is
// missing the test is skipped with a message, or fails when RWKVD_REQUIRE_FIXTURES=1 (CI).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rwkvd::test {

// $RWKVD_FIXTURES, else ../shared/fixtures beside the source tree.
std::filesystem::path fixtures_root();
bool fixtures_required();
// The build tree (to find the rwkvd binary in integration tests).
std::filesystem::path binary_dir();
// Raw little-endian float32 file.
std::vector<float> read_f32_file(const std::filesystem::path& path);
std::string read_text_file(const std::filesystem::path& path);
// The token ids recorded for `file` in fixtures/rwkv7/manifest.json.
std::vector<int32_t> manifest_tokens(const std::string& file);

}  // namespace rwkvd::test

// Declares `const std::filesystem::path var` for fixture `rel`, or skips/fails the test.
#define RWKVD_FIXTURE(var, rel)                                                          \
  const std::filesystem::path var = ::rwkvd::test::fixtures_root() / (rel);             \
  if (!std::filesystem::exists(var)) {                                                  \
    if (::rwkvd::test::fixtures_required()) {                                           \
      FAIL() << "fixture missing (RWKVD_REQUIRE_FIXTURES=1): " << var.string();          \
    } else {                                                                            \
      GTEST_SKIP() << "fixture missing, skipping (set RWKVD_FIXTURES): " << var.string(); \
    }                                                                                   \
  }
