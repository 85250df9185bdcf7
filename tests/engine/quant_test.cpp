// Dequantiser checks on synthetic data: fp16/bf16 conversions against an independent
// reference, the bit layouts on hand-made blocks, and argument checking. Dequantising llama.cpp's
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
  // The span form also checks the byte count.
  EXPECT_THROW(dequantize(GgmlType::Q8_0, std::span(bytes.data(), 33), std::span(f.data(), 32)),
               EngineError);
  EXPECT_NO_THROW(dequantize(GgmlType::Q8_0, std::span(bytes.data(), 34), std::span(f.data(), 32)));
  // Zero elements is a whole number of blocks.
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
