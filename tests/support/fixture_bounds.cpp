#include "tests/support/fixture_bounds.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/fixtures.h"

namespace rwkvd::test {

void PrintTo(const VariantBounds& v, std::ostream* os) {
  *os << v.name;
}

std::vector<VariantBounds> synthetic_a_bounds(double exact_max, double exact_mean) {
  return {
      {"f32", exact_max, exact_mean, exact_max, exact_mean, 0.99999},
      {"f16", exact_max, exact_mean, exact_max, exact_mean, 0.99999},
      {"q8_0", 0.4997, 0.0521, 0.1628, 0.0162, 0.9986},
      {"q6_k", 0.8286, 0.1345, 0.2961, 0.0421, 0.9975},
      {"q5_k_m", 1.5011, 0.2490, 0.4958, 0.0812, 0.9907},
      {"q4_k_m", 3.0199, 0.4738, 1.0367, 0.1563, 0.9647},
      {"q4_0", 3.2018, 0.5579, 0.9435, 0.1844, 0.9606},
  };
}

void expect_within(const VariantBounds& v, const DiffStats& logits, const DiffStats& embd) {
  EXPECT_LT(logits.max_abs, v.logits_max) << v.name;
  EXPECT_LT(logits.mean_abs, v.logits_mean) << v.name;
  EXPECT_GE(logits.min_row_pearson, v.min_pearson) << v.name;
  EXPECT_LT(embd.max_abs, v.embd_max) << v.name;
  EXPECT_LT(embd.mean_abs, v.embd_mean) << v.name;
  EXPECT_GE(embd.min_row_pearson, v.min_pearson) << v.name;
}

std::vector<int32_t> text200_tokens() {
  const std::string text = read_text_file(fixtures_root() / "rwkv7/tiny-rwkv7-834K.text200.txt");
  std::vector<int32_t> toks;
  for (const char c : text) toks.push_back(static_cast<uint8_t>(c));
  return toks;
}

std::vector<int32_t> long_prompt(size_t n, uint32_t vocab) {
  std::vector<int32_t> t(n);
  uint64_t x = 12345;  // a 64-bit LCG (Knuth's MMIX constants); the high bits are the best
  for (auto& v : t) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<int32_t>((x >> 33) % vocab);
  }
  return t;
}

}  // namespace rwkvd::test
