#pragma once
// The engine's one tensor type for results that leave it: float32, row-major, owning.
#include <cstdint>
#include <vector>

namespace rwkvd::engine {

struct Tensor {
  std::vector<int64_t> shape;  // e.g. {positions, width}
  std::vector<float> data;

  int64_t rows() const { return shape.empty() ? 0 : shape.front(); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return shape.empty() ? 0 : n;
  }
};

}  // namespace rwkvd::engine
