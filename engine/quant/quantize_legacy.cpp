// Quantisers for the 32-element types. The scale searches (scale_search.h) guarantee that no
// value needs clamping, so every element ends within half a step (d / 2) of its original; the
// clamps below only guard the grid's ends against float rounding in x / d.
#include <algorithm>
#include <cstring>

#include "engine/quant/blocks.h"
#include "engine/quant/codecs.h"
#include "engine/quant/half.h"
#include "engine/quant/scale_search.h"

namespace rwkvd::engine::quant {
namespace {

// q = round(x / d) clamped to [lo, hi], for all 32 values of a block; all zero when d is 0.
void round_symmetric(const float* x, float d, int lo, int hi, int out[kQK]) {
  for (int j = 0; j < kQK; ++j) out[j] = d != 0 ? std::clamp(round_nearest(x[j] / d), lo, hi) : 0;
}

void round_affine(const float* x, float d, float m, int nmax, int out[kQK]) {
  for (int j = 0; j < kQK; ++j) {
    out[j] = d > 0 ? std::clamp(round_nearest((x[j] - m) / d), 0, nmax) : 0;
  }
}

// Low 4 bits of element j in the low nibble of byte j, of element j + 16 in its high nibble.
void pack_nibbles(const int q[kQK], uint8_t qs[kQK / 2]) {
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
  }
}

// Bit 4 of element j as bit j of a little-endian u32.
void pack_high_bits(const int q[kQK], uint8_t qh[4]) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}

}  // namespace

void quantize_q4_0(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQK) {
    BlockQ4_0 b{};
    b.d = symmetric_scale_fp16(src, kQK, 8, 7);
    int q[kQK];
    round_symmetric(src, fp16_to_fp32(b.d), -8, 7, q);
    for (int& v : q) v += 8;
    pack_nibbles(q, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_q5_0(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQK) {
    BlockQ5_0 b{};
    b.d = symmetric_scale_fp16(src, kQK, 16, 15);
    int q[kQK];
    round_symmetric(src, fp16_to_fp32(b.d), -16, 15, q);
    for (int& v : q) v += 16;
    pack_nibbles(q, b.qs);
    pack_high_bits(q, b.qh);
    store_block(dst, i, b);
  }
}

void quantize_q8_0(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQK) {
    BlockQ8_0 b{};
    // -128 is left unused, as llama.cpp's quantiser leaves it: kernels elsewhere may rely on
    // the symmetric range.
    b.d = symmetric_scale_fp16(src, kQK, 127, 127);
    int q[kQK];
    round_symmetric(src, fp16_to_fp32(b.d), -127, 127, q);
    for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(q[j]);
    store_block(dst, i, b);
  }
}

void quantize_q4_1(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQK) {
    BlockQ4_1 b{};
    const AffineFp16 s = affine_scale_fp16(src, kQK, 15);
    b.d = s.d;
    b.m = s.m;
    int q[kQK];
    round_affine(src, fp16_to_fp32(s.d), fp16_to_fp32(s.m), 15, q);
    pack_nibbles(q, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_q5_1(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQK) {
    BlockQ5_1 b{};
    const AffineFp16 s = affine_scale_fp16(src, kQK, 31);
    b.d = s.d;
    b.m = s.m;
    int q[kQK];
    round_affine(src, fp16_to_fp32(s.d), fp16_to_fp32(s.m), 31, q);
    pack_nibbles(q, b.qs);
    pack_high_bits(q, b.qh);
    store_block(dst, i, b);
  }
}

}  // namespace rwkvd::engine::quant
