// TEMPORARY (replaced by the quant branch): float types only.
#include "engine/quant/dequant.h"

#include <cstring>

#include "engine/error.h"

namespace rwkvd::engine {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_fp32(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void dequantize(GgmlType type, const std::byte* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n)); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    default: throw EngineError("dequantize: type not implemented yet");
  }
}

}  // namespace rwkvd::engine
