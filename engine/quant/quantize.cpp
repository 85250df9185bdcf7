#include "engine/quant/quantize.h"

#include <cstring>
#include <string>

#include "engine/error.h"
#include "engine/quant/codecs.h"
#include "engine/quant/half.h"

namespace rwkvd::engine {

void quantize(GgmlType type, const float* src, std::byte* dst, int64_t n) {
  const int64_t nb = quant::whole_blocks(type, n, "quantize");
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q4_0:
      return quant::quantize_q4_0(src, dst, nb);
    case GgmlType::Q4_1:
      return quant::quantize_q4_1(src, dst, nb);
    case GgmlType::Q5_0:
      return quant::quantize_q5_0(src, dst, nb);
    case GgmlType::Q5_1:
      return quant::quantize_q5_1(src, dst, nb);
    case GgmlType::Q8_0:
      return quant::quantize_q8_0(src, dst, nb);
    case GgmlType::Q4_K:
      return quant::quantize_q4_k(src, dst, nb);
    case GgmlType::Q5_K:
      return quant::quantize_q5_k(src, dst, nb);
    case GgmlType::Q6_K:
      return quant::quantize_q6_k(src, dst, nb);
  }
  throw EngineError("quantize: unsupported type " + ggml_type_name(static_cast<uint32_t>(type)));
}

void quantize(GgmlType type, std::span<const float> src, std::span<std::byte> dst) {
  const auto n = static_cast<int64_t>(src.size());
  const int64_t nb = quant::whole_blocks(type, n, "quantize");
  const uint64_t want = static_cast<uint64_t>(nb) * ggml_traits(type).block_bytes;
  if (dst.size() != want) {
    throw EngineError("quantize: " + std::to_string(n) + " elements of " +
                      std::string(ggml_traits(type).name) + " need " + std::to_string(want) +
                      " bytes, got " + std::to_string(dst.size()));
  }
  quantize(type, src.data(), dst.data(), n);
}

}  // namespace rwkvd::engine
