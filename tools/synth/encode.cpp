#include "tools/synth/encode.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/error.h"

namespace rwkvd::tools::synth {
namespace {

// IEEE binary16 from binary32, round to nearest even, overflow to infinity. Local until the
// engine's fp32_to_fp16 (declared in engine/quant/dequant.h) lands with the quant branch.
uint16_t to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal (or zero) in half precision: scale so the float adder does the rounding.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // 2^24: ulp of half subnormals
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  const uint32_t mant_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xfffu + mant_odd;
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace

void encode(engine::GgmlType type, const float* src, std::byte* dst, int64_t n) {
  const auto count = static_cast<size_t>(n);
  switch (type) {
    case engine::GgmlType::F32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case engine::GgmlType::F16:
      for (size_t i = 0; i < count; ++i) {
        const uint16_t h = to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    default:
      throw engine::EngineError("synth: cannot write " +
                                std::string(engine::ggml_traits(type).name) +
                                " tensors yet (needs engine/quant/quantize.h)");
  }
}

}  // namespace rwkvd::tools::synth
