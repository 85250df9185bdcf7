#pragma once
// IEEE binary16 and bfloat16 <-> float32, bit-exact and inline: dequantising an F16 row calls
// these once per element, and every quantised block converts its scales through them.
//
// Conversions to the narrow types round to nearest, ties to even, like the F16C instructions and
// ggml do, so our F16 output is byte-identical to llama.cpp's. Subnormals are kept (not flushed),
// infinities stay infinite, and NaNs stay NaN (made quiet, sign and top payload bits kept).
#include <bit>
#include <cmath>
#include <cstdint>

namespace rwkvd::engine {

inline float fp16_to_fp32(uint16_t h) {
  // Branch-free (masks, not selects), so that row conversions vectorise.
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = h & 0x7c00u;
  const uint32_t inf_nan_mask = 0u - static_cast<uint32_t>(exp == 0x7c00u);
  const uint32_t small_mask = 0u - static_cast<uint32_t>(exp == 0);
  // Normal numbers: move exponent and mantissa into place and rebias the exponent (15 -> 127).
  // Inf/NaN: one more rebias step takes exponent 31 to 255 and keeps the payload.
  const uint32_t normal =
      (uint32_t{h & 0x7fffu} << 13) + 0x38000000u + (inf_nan_mask & 0x38000000u);
  // Zero and subnormals are mantissa * 2^-24, exact in float32.
  const uint32_t small =
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(h & 0x03ffu)) * 0x1p-24f);
  return std::bit_cast<float>((normal & ~small_mask) | (small & small_mask) | sign);
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep the top 10 payload bits, force the quiet bit
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x03ffu));
  }
  // 65520 is halfway between the largest half (65504) and 65536; the tie goes to the even
  // neighbour, which is 65536, i.e. infinity. So everything from 65520 up is infinite.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is round(|f| / 2^-24) in units of the
    // subnormal step. The scaling is exact, and nearbyint rounds ties to even in the default
    // mode. A result of 1024 is the bit pattern of 2^-14, so carrying into the exponent is right.
    const float scaled = std::bit_cast<float>(abs) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits, rounding to nearest even.
  // A carry out of the mantissa correctly bumps the exponent.
  const uint32_t round = 0x0fffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((abs - 0x38000000u + round) >> 13));
}

inline float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate, force the quiet bit
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // bfloat16 is the top half of a float32, so rounding is integer rounding of the low half;
  // it is right for subnormals too, and overflow carries into the infinity pattern.
  const uint32_t round = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + round) >> 16);
}

}  // namespace rwkvd::engine
