#pragma once
// ggml's block layouts, byte for byte (little-endian; scales are IEEE half bit patterns). Only
// engine/quant and its tests include this. Blocks in a GGUF row are only 2-byte aligned (a Q4_0
// block is 18 bytes), so they are read and written with memcpy (load_block/store_block) rather
// than by casting the mapping, which keeps the code free of alignment and aliasing traps.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace rwkvd::engine::quant {

inline constexpr int kQK = 32;    // elements per block of the "legacy" types
inline constexpr int kQKK = 256;  // elements per K-quant super-block
inline constexpr int kKScaleBytes = 12;

// value = (q - 8) * d, q in 0..15. qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// value = q * d + m, q in 0..15, same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// value = (q - 16) * d, q in 0..31: low 4 bits as Q4_0, bit 4 of element j is bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// value = q * d + m, q in 0..31, bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// value = q * d, q in -128..127 (the quantiser uses -127..127 like ggml's).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// 8 sub-blocks of 32: value = d * sc[j] * q - dmin * m[j], q in 0..15, sc/m 6-bit (packed in
// `scales`, see unpack_k_scales). qs: for each 64-element chunk, 32 bytes; low nibbles are the
// chunk's first 32 elements, high nibbles its last 32.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
// As Q4_K with q in 0..31; bit 4 of element 64*c + i (i < 32) is bit 2c of qh[i], of element
// 64*c + 32 + i it is bit 2c + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16: value = d * scales[j] * (q - 32), q in 0..63, scales signed 8-bit.
// Per 128-element half h: element 128h + 32k + i (k = 0..3, i < 32) has its low 4 bits in
// ql[64h + i + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its top 2 bits at bit 2k
// of qh[32h + i]. Note that d comes last.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// The 12 scale bytes of Q4_K/Q5_K hold eight 6-bit scales and eight 6-bit mins. Sub-blocks 0..3
// keep theirs in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 keep
// their low 4 bits in the nibbles of bytes 8..11 and their top 2 bits in the spare top bits of
// bytes 0..3 (scales) and 4..7 (mins).
inline void unpack_k_scales(const uint8_t packed[kKScaleBytes], uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = packed[j] & 63;
    mn[j] = packed[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

// Inverse of unpack_k_scales; every value must be < 64.
inline void pack_k_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t packed[kKScaleBytes]) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
  }
}

template <typename B>
inline B load_block(const std::byte* src, int64_t i) {
  static_assert(std::is_trivially_copyable_v<B>);
  B b;
  std::memcpy(&b, src + i * static_cast<int64_t>(sizeof(B)), sizeof(B));
  return b;
}

template <typename B>
inline void store_block(std::byte* dst, int64_t i, const B& b) {
  std::memcpy(dst + i * static_cast<int64_t>(sizeof(B)), &b, sizeof(B));
}

}  // namespace rwkvd::engine::quant
