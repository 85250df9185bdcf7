#include "engine/quant/dequant.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/error.h"
#include "engine/quant/blocks.h"
#include "engine/quant/codecs.h"

namespace rwkvd::engine {
namespace quant {

// The legacy 32-element types. Each loop body is branch-free so the compiler can vectorise it.

void dequantize_q4_0(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQK) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQK) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(b.qs[j] & 0x0f) * d + m;
      dst[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

namespace {
// Bit 4 of element j is bit j of qh. Spread into bytes first, so the float loops below have
// no variable shifts and vectorise.
void spread_high_bits(const uint8_t qh[4], uint8_t out[kQK]) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);  // little-endian hosts only, like the rest of the GGUF reader
  for (int j = 0; j < kQK; ++j) out[j] = static_cast<uint8_t>(((bits >> j) & 1u) << 4);
}
}  // namespace

void dequantize_q5_0(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQK) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    uint8_t hb[kQK];
    spread_high_bits(b.qh, hb);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(((b.qs[j] & 0x0f) | hb[j]) - 16) * d;
      dst[j + kQK / 2] = static_cast<float>(((b.qs[j] >> 4) | hb[j + kQK / 2]) - 16) * d;
    }
  }
}

void dequantize_q5_1(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQK) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    uint8_t hb[kQK];
    spread_high_bits(b.qh, hb);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((b.qs[j] & 0x0f) | hb[j]) * d + m;
      dst[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) | hb[j + kQK / 2]) * d + m;
    }
  }
}

void dequantize_q8_0(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQK) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

}  // namespace quant

namespace {

// 16-bit floats go through a local buffer in fixed-size chunks: `src` is bytes and may alias
// `dst` as far as the compiler knows, and at -O2 GCC only vectorises loops whose trip count is a
// known multiple of the vector width.
template <float (*Convert)(uint16_t)>
void dequantize_halves(const std::byte* src, float* dst, int64_t n) {
  constexpr int64_t kChunk = 256;
  uint16_t buf[kChunk];
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    std::memcpy(buf, src + 2 * i, sizeof(buf));
    for (int64_t j = 0; j < kChunk; ++j) dst[i + j] = Convert(buf[j]);
  }
  for (; i < n; ++i) {
    std::memcpy(buf, src + 2 * i, 2);
    dst[i] = Convert(buf[0]);
  }
}

}  // namespace

void dequantize(GgmlType type, const std::byte* src, float* dst, int64_t n) {
  const int64_t nb = quant::whole_blocks(type, n, "dequantize");
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      return dequantize_halves<fp16_to_fp32>(src, dst, n);
    case GgmlType::BF16:
      return dequantize_halves<bf16_to_fp32>(src, dst, n);
    case GgmlType::Q4_0:
      return quant::dequantize_q4_0(src, dst, nb);
    case GgmlType::Q4_1:
      return quant::dequantize_q4_1(src, dst, nb);
    case GgmlType::Q5_0:
      return quant::dequantize_q5_0(src, dst, nb);
    case GgmlType::Q5_1:
      return quant::dequantize_q5_1(src, dst, nb);
    case GgmlType::Q8_0:
      return quant::dequantize_q8_0(src, dst, nb);
    case GgmlType::Q4_K:
      return quant::dequantize_q4_k(src, dst, nb);
    case GgmlType::Q5_K:
      return quant::dequantize_q5_k(src, dst, nb);
    case GgmlType::Q6_K:
      return quant::dequantize_q6_k(src, dst, nb);
  }
  throw EngineError("dequantize: unsupported type " + ggml_type_name(static_cast<uint32_t>(type)));
}

void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  const auto n = static_cast<int64_t>(dst.size());
  const int64_t nb = quant::whole_blocks(type, n, "dequantize");
  const uint64_t want = static_cast<uint64_t>(nb) * ggml_traits(type).block_bytes;
  if (src.size() != want) {
    throw EngineError("dequantize: " + std::to_string(n) + " elements of " +
                      std::string(ggml_traits(type).name) + " need " + std::to_string(want) +
                      " bytes, got " + std::to_string(src.size()));
  }
  dequantize(type, src.data(), dst.data(), n);
}

}  // namespace rwkvd::engine
