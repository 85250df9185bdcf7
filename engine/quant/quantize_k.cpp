// Quantisers for the K-quants. Like llama.cpp's reference quantiser, each super-block is done in
// two stages: a scale (and min) search per sub-block, then quantisation of those sub-block
// scales to 6 or 8 bits against one fp16 super-block scale. The second stage is where most of
// the error comes from, so instead of rounding each sub-block scale on its own we
//   1. try the integer scales (and mins) near the rounded ones and keep, per sub-block, the
//      pair whose re-rounded values have the least squared error, then
//   2. refit the fp16 super-block scale(s) by least squares on the chosen integers,
// and repeat a few times, keeping the best super-block seen.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/quant/blocks.h"
#include "engine/quant/codecs.h"
#include "engine/quant/half.h"
#include "engine/quant/scale_search.h"

namespace rwkvd::engine::quant {
namespace {

constexpr int kRefineRounds = 3;
constexpr int kWindow = 2;  // integer scales tried: rounded +- kWindow

// ---- Q4_K / Q5_K: 8 sub-blocks of 32, value = d*sc*q - dmin*mn, sc and mn 6-bit ------------

struct AffineSuperBlock {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[8] = {}, mn[8] = {};
  uint8_t q[kQKK] = {};
  double err = std::numeric_limits<double>::infinity();
};

// Squared error of one sub-block at step s and offset m (value = s*q - m). q is 0 everywhere
// when s is 0.
float affine_sub_error(const float* x, float s, float m, float top) {
  const float inv = s > 0 ? 1 / s : 0;
  Lanes err;
  for (int i0 = 0; i0 < 32; i0 += 8) {
    for (int k = 0; k < 8; ++k) {
      const float q = grid_level((x[i0 + k] + m) * inv, 0, top);
      const float e = x[i0 + k] - (s * q - m);
      err.v[k] += e * e;
    }
  }
  return err.total();
}

void affine_sub_levels(const float* x, float s, float m, int nmax, uint8_t* q) {
  const float inv = s > 0 ? 1 / s : 0;
  for (int i = 0; i < 32; ++i) {
    q[i] = static_cast<uint8_t>(grid_level((x[i] + m) * inv, 0, static_cast<float>(nmax)));
  }
}

AffineSuperBlock encode_affine_super_block(const float* x, int nmax) {
  std::array<ScaleMin, 8> target;
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    target[j] = k_affine_scale(x + 32 * j, 32, nmax);
    max_scale = std::max(max_scale, target[j].scale);
    max_min = std::max(max_min, target[j].min);
  }
  float d = max_scale / 63, dmin = max_min / 63;
  const auto top = static_cast<float>(nmax);

  AffineSuperBlock best, cur;
  for (int round = 0; round < kRefineRounds; ++round) {
    cur.d = fp32_to_fp16(d);
    cur.dmin = fp32_to_fp16(dmin);
    const float df = fp16_to_fp32(cur.d), dmf = fp16_to_fp32(cur.dmin);
    cur.err = 0;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      const int ls0 = df > 0 ? round_nearest(target[j].scale / df) : 0;
      const int lm0 = dmf > 0 ? round_nearest(target[j].min / dmf) : 0;
      float best_sub = std::numeric_limits<float>::infinity();
      for (int a = -kWindow; a <= kWindow; ++a) {
        const int ls = std::clamp(ls0 + a, 0, 63);
        for (int b = -kWindow; b <= kWindow; ++b) {
          const int lm = std::clamp(lm0 + b, 0, 63);
          const float e =
              affine_sub_error(xs, df * static_cast<float>(ls), dmf * static_cast<float>(lm), top);
          if (e < best_sub) {
            best_sub = e;
            cur.sc[j] = static_cast<uint8_t>(ls);
            cur.mn[j] = static_cast<uint8_t>(lm);
          }
        }
      }
      affine_sub_levels(xs, df * cur.sc[j], dmf * cur.mn[j], nmax, cur.q + 32 * j);
      cur.err += best_sub;
    }
    if (cur.err < best.err) best = cur;
    if (round + 1 == kRefineRounds) break;

    // Least-squares d and dmin for x ~ d*a - dmin*c with a = sc*q, c = mn fixed.
    double saa = 0, scc = 0, sac = 0, sxa = 0, sxc = 0;
    for (int j = 0; j < 8; ++j) {
      for (int i = 0; i < 32; ++i) {
        const double a = static_cast<double>(cur.sc[j]) * cur.q[32 * j + i];
        const double c = cur.mn[j];
        const double xv = x[32 * j + i];
        saa += a * a;
        scc += c * c;
        sac += a * c;
        sxa += xv * a;
        sxc += xv * c;
      }
    }
    const double det = saa * scc - sac * sac;
    if (det > 0) {
      d = static_cast<float>((sxa * scc - sac * sxc) / det);
      dmin = static_cast<float>((sac * sxa - saa * sxc) / det);
    } else if (saa > 0) {
      d = static_cast<float>(sxa / saa);
    }
    if (!(d > 0) || !(dmin >= 0)) break;  // a degenerate fit: keep what we have
    for (int j = 0; j < 8; ++j) target[j] = {d * cur.sc[j], dmin * cur.mn[j]};
  }
  return best;
}

// ---- Q6_K: 16 sub-blocks of 16, value = d*sc*(q - 32), sc signed 8-bit ----------------------

struct SymmetricSuperBlock {
  uint16_t d = 0;
  int8_t sc[16] = {};
  int8_t q[kQKK] = {};  // -32..31
  double err = std::numeric_limits<double>::infinity();
};

float symmetric_sub_error(const float* x, float s) {
  const float inv = s != 0 ? 1 / s : 0;
  Lanes err;
  for (int i0 = 0; i0 < 16; i0 += 8) {
    for (int k = 0; k < 8; ++k) {
      const float e = x[i0 + k] - s * grid_level(x[i0 + k] * inv, -32, 31);
      err.v[k] += e * e;
    }
  }
  return err.total();
}

void symmetric_sub_levels(const float* x, float s, int8_t* q) {
  const float inv = s != 0 ? 1 / s : 0;
  for (int i = 0; i < 16; ++i) q[i] = static_cast<int8_t>(grid_level(x[i] * inv, -32, 31));
}

SymmetricSuperBlock encode_q6_k_super_block(const float* x) {
  std::array<float, 16> target;
  float max_scale = 0;
  for (int j = 0; j < 16; ++j) {
    target[j] = k_symmetric_scale(x + 16 * j, 16, 32);
    if (std::abs(target[j]) > std::abs(max_scale)) max_scale = target[j];
  }
  SymmetricSuperBlock best;
  if (std::abs(max_scale) < 1e-15f) {
    best.err = 0;
    return best;  // all (near) zero: d = 0
  }
  // As in ggml, the largest sub-block scale maps to -128, the long end of the int8 range.
  float d = max_scale / -128;
  SymmetricSuperBlock cur;
  for (int round = 0; round < kRefineRounds; ++round) {
    cur.d = fp32_to_fp16(d);
    const float df = fp16_to_fp32(cur.d);
    if (!(df != 0)) break;
    cur.err = 0;
    for (int j = 0; j < 16; ++j) {
      const int sc0 = round_nearest(target[j] / df);
      float best_sub = std::numeric_limits<float>::infinity();
      for (int a = -kWindow; a <= kWindow; ++a) {
        const int sc = std::clamp(sc0 + a, -128, 127);
        const float e = symmetric_sub_error(x + 16 * j, df * static_cast<float>(sc));
        if (e < best_sub) {
          best_sub = e;
          cur.sc[j] = static_cast<int8_t>(sc);
        }
      }
      symmetric_sub_levels(x + 16 * j, df * cur.sc[j], cur.q + 16 * j);
      cur.err += best_sub;
    }
    if (cur.err < best.err) best = cur;
    if (round + 1 == kRefineRounds) break;

    // Least-squares d for x ~ d*a with a = sc*q fixed.
    double saa = 0, sxa = 0;
    for (int i = 0; i < kQKK; ++i) {
      const double a = static_cast<double>(cur.sc[i / 16]) * cur.q[i];
      saa += a * a;
      sxa += x[i] * a;
    }
    if (!(saa > 0)) break;
    d = static_cast<float>(sxa / saa);
    for (int j = 0; j < 16; ++j) target[j] = d * cur.sc[j];
  }
  if (!(best.err < std::numeric_limits<double>::infinity())) best = SymmetricSuperBlock{};
  return best;
}

}  // namespace

void quantize_q4_k(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQKK) {
    const AffineSuperBlock s = encode_affine_super_block(src, 15);
    BlockQ4_K b{};
    b.d = s.d;
    b.dmin = s.dmin;
    pack_k_scales(s.sc, s.mn, b.scales);
    // Chunk c of 64: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b.qs[32 * c + l] = static_cast<uint8_t>(s.q[64 * c + l] | (s.q[64 * c + 32 + l] << 4));
      }
    }
    store_block(dst, i, b);
  }
}

void quantize_q5_k(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQKK) {
    const AffineSuperBlock s = encode_affine_super_block(src, 31);
    BlockQ5_K b{};
    b.d = s.d;
    b.dmin = s.dmin;
    pack_k_scales(s.sc, s.mn, b.scales);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = s.q[64 * c + l], hi = s.q[64 * c + 32 + l];
        b.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        b.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
    store_block(dst, i, b);
  }
}

void quantize_q6_k(const float* src, std::byte* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, src += kQKK) {
    const SymmetricSuperBlock s = encode_q6_k_super_block(src);
    BlockQ6_K b{};
    b.d = s.d;
    std::memcpy(b.scales, s.sc, sizeof(b.scales));
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        int q[4];
        for (int k = 0; k < 4; ++k) q[k] = s.q[128 * h + 32 * k + l] + 32;
        b.ql[64 * h + l] = static_cast<uint8_t>((q[0] & 0x0f) | ((q[2] & 0x0f) << 4));
        b.ql[64 * h + 32 + l] = static_cast<uint8_t>((q[1] & 0x0f) | ((q[3] & 0x0f) << 4));
        b.qh[32 * h + l] = static_cast<uint8_t>((q[0] >> 4) | ((q[1] >> 4) << 2) |
                                                ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6));
      }
    }
    store_block(dst, i, b);
  }
}

}  // namespace rwkvd::engine::quant
