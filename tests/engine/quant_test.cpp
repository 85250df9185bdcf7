// Quantiser and dequantiser checks on synthetic data: fp16/bf16 conversions against an
// independent reference, per-type round-trip error bounds derived from each format's step, the
// bit layouts on hand-made blocks, and argument checking. The comparison with llama.cpp's
// quantised fixtures is in quant_fixture_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/quant/blocks.h"
#include "engine/quant/dequant.h"
#include "engine/quant/quantize.h"

namespace rwkvd::engine {
namespace {

using quant::load_block;

// ---- fp16 / bf16 ---------------------------------------------------------------------------

// Value of a binary16 pattern straight from the IEEE definition, in double.
double half_value(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 31;
  const int mant = h & 1023;
  if (exp == 31) {
    return mant ? std::numeric_limits<double>::quiet_NaN()
                : sign * std::numeric_limits<double>::infinity();
  }
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// Nearest binary16 to f, ties to the even pattern, by search over the ordered finite values.
uint16_t reference_fp32_to_fp16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;  // rounds to infinity (65520 ties to 65536)
  uint16_t lo = 0, hi = 0x7bff;            // largest pattern with value <= a
  while (lo < hi) {
    const auto mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (half_value(mid) <= a) {
      lo = mid;
    } else {
      hi = static_cast<uint16_t>(mid - 1);
    }
  }
  if (lo == 0x7bff) return sign | lo;
  const double below = a - half_value(lo), above = half_value(lo + 1) - a;
  uint16_t pick = lo;
  if (above < below || (above == below && (lo & 1))) pick = static_cast<uint16_t>(lo + 1);
  return sign | pick;
}

TEST(Half, Fp16ToFp32IsExactForAllPatterns) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      // Payload and sign survive the widening.
      ASSERT_EQ((std::bit_cast<uint32_t>(f) >> 13) & 0x3ff, h & 0x3ff) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;  // -0 stays -0
    }
  }
}

TEST(Half, Fp16RoundTripsEveryNonNanPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    if ((hh & 0x7c00) == 0x7c00 && (hh & 0x3ff)) {
      const uint16_t back = fp32_to_fp16(fp16_to_fp32(hh));
      ASSERT_EQ(back & 0x7c00, 0x7c00) << h;
      ASSERT_NE(back & 0x3ff, 0) << h;  // still NaN
      ASSERT_NE(back & 0x200, 0) << h;  // and quiet
    } else {
      ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(hh)), hh) << h;
    }
  }
}

TEST(Half, Fp32ToFp16RoundsToNearestEven) {
  // Edge cases, then a large sample of bit patterns over the whole float range.
  const float cases[] = {0.0f,
                         -0.0f,
                         1.0f,
                         65504.0f,
                         65519.996f,
                         65520.0f,
                         -65520.0f,
                         1e10f,
                         0x1p-14f,
                         0x1p-24f,
                         0x1p-25f,
                         0x1.000002p-25f,
                         0x3p-25f,
                         0x5p-25f,
                         0x1.ff8p-15f,
                         0x1.ffcp-15f,
                         1.0f + 0x1p-11f,
                         1.0f + 0x3p-11f,
                         std::numeric_limits<float>::denorm_min(),
                         1e-30f,
                         -0x1p-25f};
  for (float f : cases) {
    EXPECT_EQ(fp32_to_fp16(f), reference_fp32_to_fp16(f)) << f;
  }
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);      // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);      // tie between 1 and 2 steps: even is 2
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);  // largest subnormal rounds up to 2^-14
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7e00, 0x7e00);
  // A signalling NaN whose payload is only in the low bits must not turn into infinity.
  EXPECT_EQ(fp32_to_fp16(std::bit_cast<float>(0x7f800001u)) & 0x7e00, 0x7e00);

  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), reference_fp32_to_fp16(f)) << std::bit_cast<uint32_t>(f);
  }
  // Densely around the subnormal/normal boundary and the top of the range.
  for (uint32_t b = 0x38000000u; b < 0x39000000u; b += 97) {
    const float f = std::bit_cast<float>(b);
    ASSERT_EQ(fp32_to_fp16(f), reference_fp32_to_fp16(f)) << b;
  }
  for (uint32_t b = 0x477f0000u; b < 0x47800100u; b += 3) {
    const float f = std::bit_cast<float>(b);
    ASSERT_EQ(fp32_to_fp16(f), reference_fp32_to_fp16(f)) << b;
  }
}

// Nearest bfloat16 by comparing the two candidates in double.
uint16_t reference_fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto lo = static_cast<uint16_t>(bits >> 16);
  const auto hi = static_cast<uint16_t>(lo + 1);
  const double v = std::fabs(static_cast<double>(f));
  const double vlo = std::fabs(static_cast<double>(bf16_to_fp32(lo)));
  const double vhi = (hi & 0x7fff) >= 0x7f80 ? std::ldexp(1.0, 128)
                                             : std::fabs(static_cast<double>(bf16_to_fp32(hi)));
  if (v - vlo < vhi - v || (v - vlo == vhi - v && !(lo & 1))) return lo;
  return hi;
}

TEST(Half, Bf16) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(bf16_to_fp32(hh)), h << 16);
    if ((hh & 0x7fff) <= 0x7f80) {
      ASSERT_EQ(fp32_to_bf16(bf16_to_fp32(hh)), hh);
    }
  }
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);                     // tie: even is 1.0
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x3p-8f), 0x3f82);                     // tie: even is 1 + 2^-6
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // subnormal tie
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x80018001u)), 0x8002);  // subnormals kept
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // sNaN -> qNaN
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0xff800000u)), 0xff80);  // -inf
  std::mt19937 rng(8);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), reference_fp32_to_bf16(f)) << std::bit_cast<uint32_t>(f);
  }
}

// ---- round trips ---------------------------------------------------------------------------

// x quantized (q, whose blocks the bound tests read) and dequantized again (y).
struct Coded {
  std::vector<std::byte> q;
  std::vector<float> y;
};

Coded code(GgmlType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  Coded c{std::vector<std::byte>(*ggml_row_bytes(type, static_cast<uint64_t>(n))),
          std::vector<float>(x.size())};
  quantize(type, x.data(), c.q.data(), n);
  dequantize(type, c.q.data(), c.y.data(), n);
  return c;
}

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  return code(type, x).y;
}

// Test data: each element count is a multiple of 256, so every type can take every set.
struct DataSet {
  std::string name;
  std::vector<float> x;
  bool regular;  // no extreme dynamic range inside a super-block (see KQuantBounds)
};

std::vector<DataSet> data_sets() {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int n = 256 * 64;
  std::vector<DataSet> sets;
  DataSet s{"normal(0, 0.02)", {}, true};
  for (int i = 0; i < n; ++i) s.x.push_back(0.02f * normal(rng));
  sets.push_back(s);
  s = {"uniform(-1, 1)", {}, true};
  for (int i = 0; i < n; ++i) s.x.push_back(uniform(rng));
  sets.push_back(s);
  s = {"normal + 1% outliers x10", {}, true};
  for (int i = 0; i < n; ++i) s.x.push_back(normal(rng) * (rng() % 100 == 0 ? 10.0f : 1.0f));
  sets.push_back(s);
  s = {"positive, offset 3 +- 1", {}, true};
  for (int i = 0; i < n; ++i) s.x.push_back(3.0f + uniform(rng));
  sets.push_back(s);
  s = {"32-blocks scaled 1e-3..10", {}, false};
  for (int b = 0; b < n / 32; ++b) {
    const float scale = std::pow(10.0f, 4.0f * (uniform(rng) + 1.0f) / 2.0f - 3.0f);
    for (int i = 0; i < 32; ++i) s.x.push_back(scale * normal(rng));
  }
  sets.push_back(s);
  s = {"special blocks", {}, false};
  s.x.assign(256 * 6, 0.0f);                               // zeros
  std::fill(s.x.begin() + 256, s.x.begin() + 512, 0.37f);  // a constant
  std::fill(s.x.begin() + 512, s.x.begin() + 768, -2.5f);  // a negative constant
  s.x[768 + 77] = 1.0f;                                    // one spike in zeros
  for (int i = 0; i < 256; ++i) s.x[1024 + i] = static_cast<float>(i % 7) - 3.0f;  // on a grid
  for (int i = 0; i < 256; ++i) s.x[1280 + i] = 1e-4f * normal(rng);               // small values
  sets.push_back(s);
  return sets;
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = double{a[i]} - double{b[i]};
    se += e * e;
  }
  return std::sqrt(se / static_cast<double>(a.size()));
}

TEST(QuantRoundTrip, FloatTypes) {
  for (const auto& set : data_sets()) {
    EXPECT_EQ(round_trip(GgmlType::F32, set.x), set.x);
    const auto h = round_trip(GgmlType::F16, set.x);
    const auto b = round_trip(GgmlType::BF16, set.x);
    for (size_t i = 0; i < set.x.size(); ++i) {
      ASSERT_EQ(h[i], fp16_to_fp32(fp32_to_fp16(set.x[i])));
      ASSERT_EQ(b[i], bf16_to_fp32(fp32_to_bf16(set.x[i])));
      // Half an ulp: 2^-11 relative for normal halves, 2^-25 absolute below them.
      ASSERT_LE(std::fabs(h[i] - set.x[i]), std::max(std::fabs(set.x[i]) * 0x1p-11f, 0x1p-25f));
      ASSERT_LE(std::fabs(b[i] - set.x[i]), std::fabs(set.x[i]) * 0x1p-8f);
    }
  }
}

// Q8_0, Q4_0, Q5_0: value = d * q. The scale search never needs to clamp, so every element is
// within half a step of its original. (Float rounding of x / d may add an ulp or so.)
TEST(QuantRoundTrip, SymmetricLegacyTypesStayWithinHalfAStep) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0}) {
    const auto& traits = ggml_traits(type);
    for (const auto& set : data_sets()) {
      const auto [q, y] = code(type, set.x);
      double step_sq = 0;
      for (size_t b = 0; b < set.x.size() / 32; ++b) {
        uint16_t dh;
        std::memcpy(&dh, q.data() + b * traits.block_bytes, 2);  // d is first in all three
        const double d = std::fabs(fp16_to_fp32(dh));
        step_sq += d * d;
        for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
          ASSERT_LE(std::fabs(double{y[i]} - set.x[i]), d / 2 * (1 + 1e-6) + 1e-30)
              << traits.name << " " << set.name << " element " << i;
        }
      }
      // Over a tensor the error is about that of uniform rounding, step / sqrt(12).
      const double step_rms = std::sqrt(step_sq / static_cast<double>(set.x.size() / 32));
      EXPECT_LE(rms(set.x, y), 0.31 * step_rms + 1e-30) << traits.name << " " << set.name;
    }
  }
}

// Q4_1, Q5_1: value = d * q + m; again nothing is clamped.
TEST(QuantRoundTrip, AffineLegacyTypesStayWithinHalfAStep) {
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q5_1}) {
    const auto& traits = ggml_traits(type);
    for (const auto& set : data_sets()) {
      const auto [q, y] = code(type, set.x);
      for (size_t b = 0; b < set.x.size() / 32; ++b) {
        uint16_t dm[2];
        std::memcpy(dm, q.data() + b * traits.block_bytes, 4);
        const double d = fp16_to_fp32(dm[0]);
        ASSERT_GE(d, 0);
        for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
          // The dequantiser's q * d + m rounds once more: allow an ulp of the value.
          const double slack = std::fabs(double{y[i]}) * 0x1p-23;
          ASSERT_LE(std::fabs(double{y[i]} - set.x[i]), d / 2 * (1 + 1e-6) + slack + 1e-30)
              << traits.name << " " << set.name << " element " << i;
        }
      }
    }
  }
}

// The K-quants store sub-block scales with 6 (Q4_K, Q5_K) or 8 (Q6_K) bits against one fp16
// super-block scale, and like llama.cpp's their search may clamp a value at the end of the grid
// when that lowers the total error. So the bounds are: RMS error at most 0.3 of the RMS
// sub-block step (uniform rounding gives 0.29), and, on data without extreme dynamic range
// inside a super-block, no element more than two steps off.
struct SubBlockStep {
  int first, count;
  double step;
};

std::vector<SubBlockStep> k_steps(GgmlType type, const std::vector<std::byte>& q, size_t n) {
  std::vector<SubBlockStep> out;
  for (size_t b = 0; b < n / 256; ++b) {
    const int base = static_cast<int>(256 * b);
    if (type == GgmlType::Q6_K) {
      const auto blk = load_block<quant::BlockQ6_K>(q.data(), static_cast<int64_t>(b));
      const double d = fp16_to_fp32(blk.d);
      for (int j = 0; j < 16; ++j) out.push_back({base + 16 * j, 16, std::fabs(d * blk.scales[j])});
    } else {
      const size_t bytes = ggml_traits(type).block_bytes;
      uint16_t d16;
      std::memcpy(&d16, q.data() + b * bytes, 2);  // Q4_K and Q5_K start alike
      uint8_t packed[12], sc[8], mn[8];
      std::memcpy(packed, q.data() + b * bytes + 4, 12);
      quant::unpack_k_scales(packed, sc, mn);
      for (int j = 0; j < 8; ++j) out.push_back({base + 32 * j, 32, fp16_to_fp32(d16) * sc[j]});
    }
  }
  return out;
}

TEST(QuantRoundTrip, KQuantBounds) {
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const auto& traits = ggml_traits(type);
    for (const auto& set : data_sets()) {
      const auto [q, y] = code(type, set.x);
      double step_sq = 0, err_sq = 0, worst = 0;
      for (const auto& s : k_steps(type, q, set.x.size())) {
        step_sq += s.step * s.step * s.count;
        for (int i = s.first; i < s.first + s.count; ++i) {
          const double e = std::fabs(double{y[i]} - set.x[i]);
          err_sq += e * e;
          if (s.step > 0) worst = std::max(worst, e / s.step);
        }
      }
      const double step_rms = std::sqrt(step_sq / static_cast<double>(set.x.size()));
      const double err_rms = std::sqrt(err_sq / static_cast<double>(set.x.size()));
      EXPECT_LE(err_rms, 0.3 * step_rms + 1e-7) << traits.name << " " << set.name;
      if (set.regular) {
        EXPECT_LE(worst, 2.0) << traits.name << " " << set.name;
      }
    }
  }
}

TEST(QuantRoundTrip, ZerosStayZero) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_1,
                        GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const std::vector<float> zeros(512, 0.0f);
    EXPECT_EQ(round_trip(type, zeros), zeros) << ggml_traits(type).name;
  }
}

// ---- layouts on hand-made blocks -----------------------------------------------------------

TEST(Dequantize, LegacyLayouts) {
  const uint16_t two = fp32_to_fp16(2.0f), half = fp32_to_fp16(0.5f);
  {  // Q4_0: element j in the low nibble of byte j, element j + 16 in its high nibble.
    quant::BlockQ4_0 b{};
    b.d = two;
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float y[32];
    dequantize(GgmlType::Q4_0, reinterpret_cast<const std::byte*>(&b), y, 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], 2.0f * static_cast<float>(j - 8));
      EXPECT_EQ(y[j + 16], 2.0f * static_cast<float>(7 - j));
    }
  }
  {  // Q5_1: bit 4 of element j is bit j of qh.
    quant::BlockQ5_1 b{};
    b.d = half;
    b.m = fp32_to_fp16(-1.0f);
    const uint32_t qh = 0x80000001u;  // elements 0 and 31 get bit 4
    std::memcpy(b.qh, &qh, 4);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(3 | (5 << 4));
    float y[32];
    dequantize(GgmlType::Q5_1, reinterpret_cast<const std::byte*>(&b), y, 32);
    EXPECT_EQ(y[0], 0.5f * 19 - 1);
    EXPECT_EQ(y[1], 0.5f * 3 - 1);
    EXPECT_EQ(y[16], 0.5f * 5 - 1);
    EXPECT_EQ(y[31], 0.5f * 21 - 1);
  }
  {  // Q8_0
    quant::BlockQ8_0 b{};
    b.d = half;
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
    float y[32];
    dequantize(GgmlType::Q8_0, reinterpret_cast<const std::byte*>(&b), y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j * 8 - 128));
  }
}

TEST(Dequantize, KQuantLayouts) {
  {  // Q4_K: sub-block j has scale sc[j] and min mn[j]; chunk c holds sub-blocks 2c, 2c + 1.
    quant::BlockQ4_K b{};
    b.d = fp32_to_fp16(1.0f);
    b.dmin = fp32_to_fp16(0.25f);
    const uint8_t sc[8] = {1, 2, 3, 4, 17, 33, 49, 63}, mn[8] = {0, 1, 2, 3, 60, 50, 40, 30};
    quant::pack_k_scales(sc, mn, b.scales);
    uint8_t sc2[8], mn2[8];
    quant::unpack_k_scales(b.scales, sc2, mn2);
    EXPECT_TRUE(std::equal(sc, sc + 8, sc2) && std::equal(mn, mn + 8, mn2));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l)
        b.qs[32 * c + l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
    }
    float y[256];
    dequantize(GgmlType::Q4_K, reinterpret_cast<const std::byte*>(&b), y, 256);
    for (int i = 0; i < 256; ++i) {
      const int j = i / 32, l = i % 32;
      const int q = j % 2 == 0 ? l % 16 : 15 - l % 16;
      EXPECT_EQ(y[i], static_cast<float>(sc[j] * q) - 0.25f * static_cast<float>(mn[j])) << i;
    }
  }
  {  // Q6_K: d last; quarter k of each 128-half reads nibble k / 2 of ql[i + 32 (k % 2)].
    quant::BlockQ6_K b{};
    b.d = fp32_to_fp16(0.5f);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
    std::vector<int> want_q(256);
    for (int i = 0; i < 256; ++i) want_q[i] = (i * 37) % 64;
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const int* q = &want_q[128 * h + l];
        b.ql[64 * h + l] = static_cast<uint8_t>((q[0] & 15) | ((q[64] & 15) << 4));
        b.ql[64 * h + 32 + l] = static_cast<uint8_t>((q[32] & 15) | ((q[96] & 15) << 4));
        b.qh[32 * h + l] = static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) |
                                                ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
      }
    }
    float y[256];
    dequantize(GgmlType::Q6_K, reinterpret_cast<const std::byte*>(&b), y, 256);
    for (int i = 0; i < 256; ++i) {
      EXPECT_EQ(y[i],
                0.5f * static_cast<float>(b.scales[i / 16]) * static_cast<float>(want_q[i] - 32))
          << i;
    }
  }
}

// ---- arguments -----------------------------------------------------------------------------

TEST(QuantArgs, WrongCountsThrow) {
  std::vector<float> f(512);
  std::vector<std::byte> bytes(4096);
  EXPECT_THROW(dequantize(GgmlType::Q4_0, bytes.data(), f.data(), 31), EngineError);
  EXPECT_THROW(dequantize(GgmlType::Q6_K, bytes.data(), f.data(), 255), EngineError);
  EXPECT_THROW(dequantize(GgmlType::F16, bytes.data(), f.data(), -1), EngineError);
  EXPECT_THROW(quantize(GgmlType::Q4_K, f.data(), bytes.data(), 300), EngineError);
  EXPECT_THROW(quantize(GgmlType::Q8_0, f.data(), bytes.data(), -32), EngineError);
  // The span forms also check the byte count.
  EXPECT_THROW(dequantize(GgmlType::Q8_0, std::span(bytes.data(), 33), std::span(f.data(), 32)),
               EngineError);
  EXPECT_THROW(
      quantize(GgmlType::Q8_0, std::span<const float>(f.data(), 32), std::span(bytes.data(), 35)),
      EngineError);
  EXPECT_NO_THROW(dequantize(GgmlType::Q8_0, std::span(bytes.data(), 34), std::span(f.data(), 32)));
  // Zero elements is a whole number of blocks.
  EXPECT_NO_THROW(quantize(GgmlType::Q4_K, f.data(), bytes.data(), 0));
  EXPECT_NO_THROW(dequantize(GgmlType::Q4_K, bytes.data(), f.data(), 0));
  try {
    dequantize(GgmlType::Q5_K, bytes.data(), f.data(), 100);
    FAIL();
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("q5_K"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rwkvd::engine
