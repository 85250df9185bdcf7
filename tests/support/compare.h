#pragma once
// Comparing float outputs against reference fixtures.
#include <cstdint>
#include <span>
#include <string>

namespace rwkvd::test {

struct DiffStats {
  double max_abs = 0, mean_abs = 0;
  double min_row_pearson = 1;  // lowest per-row (per-position) correlation
  int64_t worst_row = -1;
  std::string str() const;
};

// a and b hold `rows` rows of `width` floats.
DiffStats compare_rows(std::span<const float> a, std::span<const float> b, int64_t width);

}  // namespace rwkvd::test
