// Our dequantisers against llama.cpp's quantiser: synthetic-A.f32.gguf quantised by
// llama_model_quantize to F16, Q8_0, Q4_0, Q4_K_M, Q5_K_M and Q6_K. Dequantising llama.cpp's
// blocks must land close to the F32 source, which checks our reading of every layout on data
// we did not write.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/quant/dequant.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine {
namespace {

const char* const kVariants[] = {"f16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"};

std::vector<float> to_f32(const GgufTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  dequantize(t.type, t.data, out);
  return out;
}

double sum_sq_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = double{a[i]} - double{b[i]};
    se += e * e;
  }
  return se;
}

// The format's step for the source values x, as sum of squares over elements: the block's
// extent over its number of levels, as llama.cpp's reference quantiser would choose it (for the
// floats, an ulp). Uniform rounding at that step has an RMS error of step / sqrt(12) = 0.29 step.
double sum_sq_step(GgmlType type, const std::vector<float>& x) {
  auto per_group = [&](size_t group, auto step_of) {
    double s = 0;
    for (size_t b = 0; b < x.size(); b += group) {
      float lo = x[b], hi = x[b], amax = 0;
      for (size_t i = b; i < b + group; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
        amax = std::max(amax, std::fabs(x[i]));
      }
      const double st = step_of(lo, hi, amax);
      s += st * st * static_cast<double>(group);
    }
    return s;
  };
  switch (type) {
    case GgmlType::F16:
    case GgmlType::BF16: {
      const double ulp = type == GgmlType::F16 ? 0x1p-10 : 0x1p-7;
      double s = 0;
      for (float v : x) s += (v * ulp) * (v * ulp);
      return s;
    }
    case GgmlType::Q8_0:
      return per_group(32, [](float, float, float a) { return a / 127.0; });
    case GgmlType::Q4_0:
      return per_group(32, [](float, float, float a) { return a / 8.0; });
    case GgmlType::Q5_0:
      return per_group(32, [](float, float, float a) { return a / 16.0; });
    case GgmlType::Q4_1:
      return per_group(32, [](float l, float h, float) { return (h - l) / 15.0; });
    case GgmlType::Q5_1:
      return per_group(32, [](float l, float h, float) { return (h - l) / 31.0; });
    case GgmlType::Q4_K:
      return per_group(32, [](float l, float h, float) { return (h - std::min(l, 0.0f)) / 15.0; });
    case GgmlType::Q5_K:
      return per_group(32, [](float l, float h, float) { return (h - std::min(l, 0.0f)) / 31.0; });
    case GgmlType::Q6_K:
      return per_group(16, [](float, float, float a) { return a / 32.0; });
    case GgmlType::F32:
      return 0;
  }
  return 0;
}

TEST(QuantFixture, LlamaCppBlocksDequantizeCloseToSource) {
  RWKVD_FIXTURE(f32_path, "rwkv7/synthetic-A.f32.gguf");
  const auto source = GgufFile::open(f32_path.string());
  for (const char* variant : kVariants) {
    RWKVD_FIXTURE(path, std::string("rwkv7/synthetic-A.") + variant + ".gguf");
    const auto file = GgufFile::open(path.string());
    int quantized = 0;
    for (const auto& t : file->tensors()) {
      const GgufTensor& src = source->tensor(t.name);
      ASSERT_EQ(src.ne, t.ne) << t.name;
      const auto x = to_f32(src);
      const auto y = to_f32(t);
      if (t.type == GgmlType::F32) {
        EXPECT_EQ(x, y) << variant << " " << t.name;
        continue;
      }
      ++quantized;
      const double n = static_cast<double>(x.size());
      const double rmse = std::sqrt(sum_sq_diff(x, y) / n);
      const double step = std::sqrt(sum_sq_step(t.type, x) / n);
      // 0.29 step for uniform rounding; a misread layout would be off by whole steps.
      EXPECT_LT(rmse, 0.6 * step) << variant << " " << t.name << " " << ggml_traits(t.type).name;
      EXPECT_GT(rmse, 0.0) << variant << " " << t.name;
    }
    EXPECT_EQ(quantized, 20) << variant;
  }
}

}  // namespace
}  // namespace rwkvd::engine
