#include "engine/cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "engine/quant/dequant.h"

namespace rwkvd::engine::cpu {

std::vector<float> to_f32(const GgufTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  dequantize(t.type, t.data.data(), out.data(), t.n_elements());
  return out;
}

void dequantize_row(const GgufTensor& t, int64_t row, float* out) {
  const uint64_t row_bytes = *ggml_row_bytes(t.type, static_cast<uint64_t>(t.ne[0]));
  dequantize(t.type, t.data.data() + static_cast<uint64_t>(row) * row_bytes, out, t.ne[0]);
}

float dot(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums let the compiler use SIMD without -ffast-math.
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void matmul(ThreadPool& pool, const GgufTensor& w, const float* x, int64_t n_tok, float* y) {
  const int64_t in = w.ne[0], out = w.ne[1];
  // Blocks of kRows weight rows are dequantized together and applied to each token in turn,
  // so each activation row is read once per block while it is hot in L1.
  constexpr int64_t kRows = 16;
  const size_t n_blocks = static_cast<size_t>((out + kRows - 1) / kRows);
  pool.parallel_for(n_blocks, [&](size_t begin, size_t end, unsigned) {
    std::vector<float> rows(static_cast<size_t>(kRows * in));
    for (size_t blk = begin; blk < end; ++blk) {
      const int64_t o0 = static_cast<int64_t>(blk) * kRows, n = std::min(kRows, out - o0);
      for (int64_t r = 0; r < n; ++r) dequantize_row(w, o0 + r, &rows[r * in]);
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* xt = x + t * in;
        float* yt = y + t * out + o0;
        for (int64_t r = 0; r < n; ++r) yt[r] = dot(&rows[r * in], xt, in);
      }
    }
  });
}

void layer_norm(const float* x, int64_t rows, int64_t width, const float* w, const float* b,
                float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    float* yr = out + r * width;
    double mean = 0.0;
    for (int64_t i = 0; i < width; ++i) mean += xr[i];
    mean /= static_cast<double>(width);
    double var = 0.0;
    for (int64_t i = 0; i < width; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(width);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < width; ++i) {
      yr[i] = static_cast<float>((xr[i] - mean) * inv) * w[i] + b[i];
    }
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace rwkvd::engine::cpu
