#pragma once
// Scale searches shared by the quantisers. Each finds, for one group of values, the scale (and
// offset) of a uniform integer grid that makes the squared rounding error small. They minimise
// the plain, unweighted squared error: without activation statistics (an imatrix) every weight
// contributes equally to the error of W·x, so this is the error that matters, and it is the one
// our tests measure. (llama.cpp's reference quantiser weights some searches by |x| or x².)
#include <algorithm>
#include <cstdint>

namespace rwkvd::engine::quant {

// Nearest integer, ties to even (the FPU's default mode): adding and subtracting 1.5 * 2^23
// leaves only the integer part. |v| is clamped to 2^22, far beyond any grid used here, so a
// division by a tiny scale cannot overflow the conversion.
inline int round_nearest(float v) {
  v = std::clamp(v, -4194304.0f, 4194304.0f);
  return static_cast<int>((v + 12582912.0f) - 12582912.0f);
}

// The grid level nearest to v, as a float: v clamped to [lo, hi] (integers), then rounded to
// nearest even. Float-only, so loops of it vectorise (SSE2 has no 32-bit integer min/max).
inline float grid_level(float v, float lo, float hi) {
  return (std::clamp(v, lo, hi) + 12582912.0f) - 12582912.0f;
}

// Eight independent partial sums. Accumulating into one float chains every addition on the
// previous one (and keeps GCC from vectorising, as it may not reorder float additions); the
// inner loops of the searches run over 8 lanes into one of these instead.
struct Lanes {
  float v[8] = {};
  float total() const { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }
};

// Symmetric grid for the fp16-scaled legacy types: returns the fp16 bits of d for
// value = d * q, q = round(x / d) in [-nneg, npos] (Q4_0: 8, 7; Q5_0: 16, 15; Q8_0: 127, 127).
// d is the minimiser of the squared error among all scales at which no value needs clamping, so
// every value ends within |d| / 2 of its original. The scales searched run from the smallest
// such one up to one that leaves three levels unused, and the search is exact: it walks every
// rounding breakpoint in that range, solving the least-squares scale between breakpoints. d is
// then rounded to fp16 in the direction that keeps the no-clamping guarantee. n <= 32.
uint16_t symmetric_scale_fp16(const float* x, int n, int nneg, int npos);

// Affine grid for Q4_1 (nmax 15) and Q5_1 (31): value = d * q + m, q = round((x - m) / d) in
// [0, nmax], d and m stored as fp16. Searches stretched grids like make_qkx (a least-squares
// fit of d and m for each candidate rounding), measures each candidate's true error after the
// fp16 rounding of d and m, and keeps only candidates where every value ends within d / 2 of its
// original. Falls back to the min/max grid, whose fp16 rounding is directed to keep that bound.
struct AffineFp16 {
  uint16_t d;
  uint16_t m;
};
AffineFp16 affine_scale_fp16(const float* x, int n, int nmax);

// The K-quant sub-block search (Q4_K: nmax 15, Q5_K: 31): value = scale * q - min, q in
// [0, nmax], scale >= 0, min >= 0 (the format stores the offset as an unsigned multiple of
// dmin). The result is refined later, once the super-block's 6-bit scales are chosen.
struct ScaleMin {
  float scale;
  float min;
};
ScaleMin k_affine_scale(const float* x, int n, int nmax);

// The Q6_K sub-block search: a signed scale for q = round(x / scale) in [-nmax, nmax - 1]
// (clamped), like make_qx_quants but unweighted and on a finer grid. Returns 0 for an all-zero
// group.
float k_symmetric_scale(const float* x, int n, int nmax);

}  // namespace rwkvd::engine::quant
