#include "engine/quant/scale_search.h"

#include <array>
#include <cmath>
#include <limits>

#include "engine/quant/half.h"

namespace rwkvd::engine::quant {
namespace {

constexpr int kMaxGroup = 32;

// Smallest fp16 >= v (v >= 0, finite): nearest rounding, then one step up if it fell below.
uint16_t fp16_at_least(float v) {
  uint16_t h = fp32_to_fp16(v);
  if (fp16_to_fp32(h) < v && h < 0x7bffu) ++h;  // positive halves are ordered like their bits
  return h;
}

// Largest fp16 <= v (finite v).
uint16_t fp16_at_most(float v) {
  uint16_t h = fp32_to_fp16(v);
  // Rounded up: step away from zero if negative, towards it if positive.
  if (fp16_to_fp32(h) > v) h = (h & 0x8000u) ? h + 1 : h - 1;
  return h;
}

struct SweepResult {
  double err = std::numeric_limits<double>::infinity();
  float d = 0;
  float d_lo = 0;  // the smallest clamp-free scale
};

// Exact clip-free search for d > 0 on the grid [-nneg, npos] applied to y. Between consecutive
// rounding breakpoints every q is fixed and the error is a quadratic in d, minimised by the
// least-squares scale Sxq / Sqq (clamped into the interval). As d falls from d_hi to d_lo, |q_i|
// grows by one each time d crosses |y_i| / (k + 0.5); sorting those crossings and updating the
// sums incrementally visits every interval once.
SweepResult sweep_positive_scale(const float* y, int n, int nneg, int npos, float amax) {
  float pos = 0, neg = 0;
  double sxx = 0;
  for (int i = 0; i < n; ++i) {
    pos = std::max(pos, y[i]);
    neg = std::max(neg, -y[i]);
    sxx += double{y[i]} * y[i];
  }
  const double d_lo = std::max(pos / (npos + 0.5), neg / (nneg + 0.5));
  const double d_hi = amax / (std::max(nneg, npos) - 3.0);

  struct Event {
    double d;
    int i;
  };
  // |y_i| crosses at most amax * (1/d_lo - 1/d_hi) + 1 <= 4.5 breakpoints in the range.
  std::array<Event, kMaxGroup * 6> events;
  int n_events = 0;
  std::array<int, kMaxGroup> q{};
  double sxq = 0, sqq = 0;
  for (int i = 0; i < n; ++i) {
    const double a = std::fabs(double{y[i]});
    const int cap = y[i] >= 0 ? npos : nneg;
    int k = std::min(cap, static_cast<int>(std::floor(a / d_hi + 0.5)));
    q[i] = k;
    sxq += a * k;
    sqq += static_cast<double>(k) * k;
    for (; k < cap && n_events < static_cast<int>(events.size()); ++k) {
      const double at = a / (k + 0.5);
      if (at < d_lo) break;
      events[n_events++] = {at, i};
    }
  }
  std::sort(events.begin(), events.begin() + n_events,
            [](const Event& a, const Event& b) { return a.d > b.d; });

  SweepResult best;
  auto consider = [&](double lo, double hi) {
    if (sqq <= 0 || hi < lo) return;
    const double d = std::clamp(sxq / sqq, lo, hi);
    const double err = sxx - 2 * d * sxq + d * d * sqq;
    if (err < best.err) best = {err, static_cast<float>(d), static_cast<float>(d_lo)};
  };
  double hi = d_hi;
  for (int e = 0; e < n_events; ++e) {
    consider(events[e].d, hi);
    const int i = events[e].i;
    sxq += std::fabs(double{y[i]});
    sqq += 2.0 * q[i] + 1;  // (k + 1)^2 - k^2
    ++q[i];
    hi = events[e].d;
  }
  consider(d_lo, hi);
  if (!std::isfinite(best.err)) best = {sxx, static_cast<float>(d_lo), static_cast<float>(d_lo)};
  return best;
}

struct GridSums {
  float q, qq, xq;
};

// The sums of q, q^2 and q * x over x's n values rounded on the grid stretched by `iscale` from
// `lo` (q = grid_level((x - lo) * iscale, 0, top)), summed in eight lanes (see Lanes); the q
// are kept in `qs` when it is given.
GridSums stretched_grid_sums(const float* x, int n, float lo, float iscale, float top, float* qs) {
  Lanes sq, sqq, sxq;
  for (int i0 = 0; i0 < n; i0 += 8) {
    for (int k = 0; k < 8; ++k) {
      const float q = grid_level((x[i0 + k] - lo) * iscale, 0, top);
      if (qs != nullptr) qs[i0 + k] = q;
      sq.v[k] += q;
      sqq.v[k] += q * q;
      sxq.v[k] += q * x[i0 + k];
    }
  }
  return {sq.total(), sqq.total(), sxq.total()};
}

}  // namespace

uint16_t symmetric_scale_fp16(const float* x, int n, int nneg, int npos) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0;
  std::array<float, kMaxGroup> flipped;
  for (int i = 0; i < n; ++i) flipped[i] = -x[i];
  // A negative d flips the grid, so search d > 0 on x and on -x.
  const SweepResult plus = sweep_positive_scale(x, n, nneg, npos, amax);
  const SweepResult minus =
      nneg == npos ? SweepResult{} : sweep_positive_scale(flipped.data(), n, nneg, npos, amax);
  const bool use_minus = minus.err < plus.err;
  const SweepResult& r = use_minus ? minus : plus;
  // The nearest fp16, unless that falls below d_lo, where the extreme value would need clamping.
  uint16_t h = fp32_to_fp16(r.d);
  if (fp16_to_fp32(h) < r.d_lo) h = fp16_at_least(r.d_lo);
  return use_minus ? static_cast<uint16_t>(h | 0x8000u) : h;
}

AffineFp16 affine_scale_fp16(const float* x, int n, int nmax) {
  float lo = x[0], hi = x[0];
  float sx = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sx += x[i];
  }
  // The fallback: the min/max grid, with m rounded down and d up so that it still spans
  // [lo, hi] after rounding.
  AffineFp16 best{0, fp16_at_most(lo)};
  {
    const float m = fp16_to_fp32(best.m);
    if (hi > m) best.d = fp16_at_least((hi - m) / static_cast<float>(nmax));
  }
  if (hi == lo) return best;

  // Error of a stored (d, m) after re-rounding every value; +inf if some value would end
  // further than d / 2 from where it started (it would need clamping).
  const float top = static_cast<float>(nmax);
  auto error_of = [&](AffineFp16 c) {
    const float d = fp16_to_fp32(c.d), m = fp16_to_fp32(c.m);
    if (!(d > 0)) return std::numeric_limits<float>::infinity();
    if ((lo - m) / d < -0.5f || (hi - m) / d > top + 0.5f) {
      return std::numeric_limits<float>::infinity();
    }
    Lanes err;
    for (int i0 = 0; i0 < n; i0 += 8) {
      for (int k = 0; k < 8; ++k) {
        const float q = grid_level((x[i0 + k] - m) / d, 0, top);
        const float e = x[i0 + k] - (q * d + m);
        err.v[k] += e * e;
      }
    }
    return err.total();
  };
  float best_err = error_of(best);

  // Candidate roundings from grids stretched between nmax - 1 and nmax + 1 steps over the range;
  // each gets its least-squares d and m.
  const float range = hi - lo;
  const auto fn = static_cast<float>(n);
  for (int t = 0; t <= 40; ++t) {
    const float iscale = (top - 1.0f + 0.05f * static_cast<float>(t)) / range;
    const auto [s_q, s_qq, s_xq] = stretched_grid_sums(x, n, lo, iscale, top, nullptr);
    const float det = fn * s_qq - s_q * s_q;
    if (!(det > 0)) continue;
    const float d = (fn * s_xq - sx * s_q) / det;
    const float m = (sx - d * s_q) / fn;
    const AffineFp16 c{fp32_to_fp16(d), fp32_to_fp16(m)};
    const float err = error_of(c);
    if (err < best_err) {
      best_err = err;
      best = c;
    }
  }
  return best;
}

ScaleMin k_affine_scale(const float* x, int n, int nmax) {
  float lo = x[0], hi = x[0], sx = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sx += x[i];
  }
  lo = std::min(lo, 0.0f);  // the offset the format can store is <= 0
  if (hi <= lo) return {0, -lo};
  const float range = hi - lo, top = static_cast<float>(nmax), fn = static_cast<float>(n);

  // Squared error of value = scale * q + off with q rounded on the stretched grid `iscale`.
  std::array<float, kMaxGroup> qs;
  auto error_of = [&](float scale, float off) {
    Lanes err;
    for (int i0 = 0; i0 < n; i0 += 8) {
      for (int k = 0; k < 8; ++k) {
        const float e = scale * qs[i0 + k] + off - x[i0 + k];
        err.v[k] += e * e;
      }
    }
    return err.total();
  };
  // Start from the min/max grid, then try stretched grids with least-squares scale and offset.
  float best_scale = range / top, best_off = lo;
  for (int i = 0; i < n; ++i) qs[i] = grid_level((x[i] - lo) / best_scale, 0, top);
  float best_err = error_of(best_scale, best_off);
  for (int t = 0; t <= 40; ++t) {
    const float iscale = (top - 1.0f + 0.05f * static_cast<float>(t)) / range;
    const auto [s_q, s_qq, s_xq] = stretched_grid_sums(x, n, lo, iscale, top, qs.data());
    const float det = fn * s_qq - s_q * s_q;
    if (!(det > 0)) continue;
    float scale = (fn * s_xq - sx * s_q) / det;
    float off = (s_qq * sx - s_q * s_xq) / det;
    if (off > 0) {  // not storable: refit the scale alone with offset 0
      off = 0;
      scale = s_xq / s_qq;
    }
    if (!(scale > 0)) continue;
    const float err = error_of(scale, off);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      best_off = off;
    }
  }
  return {best_scale, -best_off};
}

float k_symmetric_scale(const float* x, int n, int nmax) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  }
  if (amax < 1e-15f) return 0;
  // The extreme value goes to the -nmax end of the grid, which is one level longer than the
  // positive end; grids from nmax - 2 to nmax + 2 levels are tried, each with its
  // least-squares scale, keeping the one with the smallest error (largest Sxq^2 / Sqq).
  const float lo = -static_cast<float>(nmax), hi = static_cast<float>(nmax - 1);
  float best_scale = vmax / lo, best_gain = -1;
  for (int t = -40; t <= 40; ++t) {
    const float iscale = -(static_cast<float>(nmax) + 0.05f * static_cast<float>(t)) / vmax;
    Lanes sxq, sqq;
    for (int i0 = 0; i0 < n; i0 += 8) {
      for (int k = 0; k < 8; ++k) {
        const float q = grid_level(iscale * x[i0 + k], lo, hi);
        sxq.v[k] += x[i0 + k] * q;
        sqq.v[k] += q * q;
      }
    }
    const float s_xq = sxq.total(), s_qq = sqq.total();
    if (s_qq > 0 && s_xq * s_xq > best_gain * s_qq) {
      best_gain = s_xq * s_xq / s_qq;
      best_scale = s_xq / s_qq;
    }
  }
  return best_scale;
}

}  // namespace rwkvd::engine::quant
