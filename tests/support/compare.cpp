#include "tests/support/compare.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace rwkvd::test {

std::string DiffStats::str() const {
  std::ostringstream os;
  os << "max|diff| " << max_abs << " mean|diff| " << mean_abs << " min row pearson "
     << min_row_pearson << " (row " << worst_row << ")";
  return os.str();
}

DiffStats compare_rows(std::span<const float> a, std::span<const float> b, int64_t width) {
  if (a.size() != b.size() || width <= 0 || a.size() % static_cast<size_t>(width) != 0) {
    throw std::invalid_argument("compare_rows: sizes differ: " + std::to_string(a.size()) +
                                " vs " + std::to_string(b.size()));
  }
  DiffStats s;
  double sum = 0;
  const int64_t rows = static_cast<int64_t>(a.size()) / width;
  for (int64_t r = 0; r < rows; ++r) {
    double ma = 0, mb = 0;
    for (int64_t i = 0; i < width; ++i) {
      const double x = a[r * width + i], y = b[r * width + i];
      const double d = std::fabs(x - y);
      if (!(d <= s.max_abs)) s.max_abs = d;  // also catches NaN
      sum += d;
      ma += x;
      mb += y;
    }
    ma /= width;
    mb /= width;
    double sab = 0, saa = 0, sbb = 0;
    for (int64_t i = 0; i < width; ++i) {
      const double x = a[r * width + i] - ma, y = b[r * width + i] - mb;
      sab += x * y;
      saa += x * x;
      sbb += y * y;
    }
    const double p = (saa > 0 && sbb > 0) ? sab / std::sqrt(saa * sbb) : (saa == sbb ? 1.0 : 0.0);
    if (!(p >= s.min_row_pearson)) {
      s.min_row_pearson = p;
      s.worst_row = r;
    }
  }
  s.mean_abs = sum / static_cast<double>(a.size());
  return s;
}

}  // namespace rwkvd::test
