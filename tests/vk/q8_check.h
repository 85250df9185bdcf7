#pragma once
// Checks of the int8 form of activations (shaders/q8.glsl) that kernels write for the int8-input
// decode products (mvq.comp): shared by the product, shift and wkv tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "engine/vk/kernels.h"

namespace rwkvd::test {

// Checks the int8 form (shaders/q8.glsl) of x [T][K] written at float offset q_off of act:
// every q within half a step of x, one element of each non-zero run at |q| = 127, the run's
// exact sum beside it. xq gets x as the form represents it (d * q).
inline void check_q8_form(const std::byte* act, uint32_t q_off, const float* x, float* xq,
                          uint32_t T, uint32_t K) {
  const uint32_t qr = engine::vk::q8_row_floats(K);
  for (uint32_t t = 0; t < T; ++t) {
    const std::byte* row = act + size_t{q_off + t * qr} * 4;
    const auto* ds = reinterpret_cast<const float*>(act) + q_off + t * qr + K / 4;
    for (uint32_t run = 0; run < K / 16; ++run) {
      const float d = ds[2 * run], sum = ds[2 * run + 1];
      float amax = 0, want_sum = 0;
      int qmax = 0;
      for (uint32_t i = 16 * run; i < 16 * run + 16; ++i) {
        const float xi = x[t * K + i];
        amax = std::max(amax, std::abs(xi));
        want_sum += xi;
        const int q = static_cast<int>(static_cast<int8_t>(row[i]));
        qmax = std::max(qmax, std::abs(q));
        xq[t * K + i] = d * static_cast<float>(q);
        ASSERT_LE(std::abs(xi - xq[t * K + i]), 0.5f * d * (1 + 1e-5f) + 1e-30f)
            << "t " << t << " element " << i << " q " << q << " d " << d;
      }
      ASSERT_NEAR(d, amax / 127, 1e-6 * amax) << "t " << t << " run " << run;
      ASSERT_EQ(qmax, amax > 0 ? 127 : 0) << "t " << t << " run " << run;
      ASSERT_NEAR(sum, want_sum, 1e-5 * 16 * amax + 1e-30) << "t " << t << " run " << run;
    }
  }
}

}  // namespace rwkvd::test
