// Decoders for the K-quants (256-element super-blocks). Layouts are described in blocks.h.
#include <type_traits>

#include "engine/quant/blocks.h"
#include "engine/quant/codecs.h"
#include "engine/quant/half.h"

namespace rwkvd::engine::quant {

namespace {

// Q4_K and Q5_K: 8 sub-blocks of 32 elements, each with a 6-bit scale and min; chunk c of 64
// elements holds sub-block 2c in the low nibbles and 2c + 1 in the high ones. Q5_K adds each
// element's fifth bit: bit 2c (low nibble) or 2c + 1 (high) of qh[l].
template <class Block>
void dequantize_q45_k(const std::byte* src, float* dst, int64_t n_blocks) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto b = load_block<Block>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    uint8_t sc[8], mn[8];
    unpack_k_scales(b.scales, sc, mn);
    for (int c = 0; c < 4; ++c, dst += 64) {
      const uint8_t* q = b.qs + 32 * c;
      const float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c];
      const float d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
      for (int l = 0; l < 32; ++l) {
        uint32_t lo = q[l] & 0x0fu, hi = q[l] >> 4u;
        if constexpr (kFifthBit) {
          lo |= ((b.qh[l] >> (2 * c)) & 1u) << 4;
          hi |= ((b.qh[l] >> (2 * c + 1)) & 1u) << 4;
        }
        dst[l] = d1 * static_cast<float>(lo) - m1;
        dst[l + 32] = d2 * static_cast<float>(hi) - m2;
      }
    }
  }
}

}  // namespace

void dequantize_q4_k(const std::byte* src, float* dst, int64_t n_blocks) {
  dequantize_q45_k<BlockQ4_K>(src, dst, n_blocks);
}

void dequantize_q5_k(const std::byte* src, float* dst, int64_t n_blocks) {
  dequantize_q45_k<BlockQ5_K>(src, dst, n_blocks);
}

void dequantize_q6_k(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int h = 0; h < 2; ++h, dst += 128) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      const int8_t* sc = b.scales + 8 * h;
      // Quarter k of this half: low 4 bits from ql (nibble k / 2 of byte i + 32 * (k % 2)),
      // top 2 bits from bits 2k..2k+1 of qh[i]; scale index 2k + i / 16.
      for (int k = 0; k < 4; ++k) {
        const int shift = 4 * (k / 2);
        const uint8_t* lo = ql + 32 * (k % 2);
        const float d0 = d * sc[2 * k], d1 = d * sc[2 * k + 1];
        for (int l = 0; l < 32; ++l) {
          const int q =
              static_cast<int>(((lo[l] >> shift) & 0x0f) | (((qh[l] >> (2 * k)) & 3) << 4));
          dst[32 * k + l] = (l < 16 ? d0 : d1) * static_cast<float>(q - 32);
        }
      }
    }
  }
}

}  // namespace rwkvd::engine::quant
