#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

namespace rwkvd::engine {
namespace {

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : p_(params) {
  uint64_t x = params.seed;
  for (auto& s : s_) s = splitmix(x);
}

uint64_t Sampler::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Sampler::next_unit() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

int32_t argmax(std::span<const float> v) {
  constexpr size_t kLanes = 16;
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  float m[kLanes];
  std::fill(std::begin(m), std::end(m), kLow);
  size_t i = 0;
  for (; i + kLanes <= v.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) m[j] = v[i + j] > m[j] ? v[i + j] : m[j];
  }
  float best = kLow;
  for (const float x : m) best = x > best ? x : best;
  for (; i < v.size(); ++i) best = v[i] > best ? v[i] : best;
  for (size_t k = 0; k < v.size(); ++k) {
    if (v[k] == best) return static_cast<int32_t>(k);
  }
  return 0;  // every value NaN (or the row empty)
}

int32_t Sampler::sample(std::span<const float> logits) {
  const size_t n = logits.size();
  work_.assign(logits.begin(), logits.end());
  for (const auto& [tok, count] : counts_) {
    if (tok >= 0 && static_cast<size_t>(tok) < n) {
      work_[tok] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(count);
    }
  }
  const int32_t chosen = greedy() ? argmax(work_) : draw();
  accept(chosen);
  return chosen;
}

int32_t Sampler::draw() {
  const size_t n = work_.size();
  // Candidates by descending logit, ties by id: a total order, so the top k and every sorted
  // head of them are the same on every standard library.
  auto better = [&](int32_t a, int32_t b) {
    return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
  };
  ids_.resize(n);
  std::iota(ids_.begin(), ids_.end(), 0);
  const size_t k = (p_.top_k == 0 || p_.top_k > n) ? n : p_.top_k;
  // ids_[0, sorted) are in descending order: all k where top_k cuts, else a head widened (64,
  // 256, ...) only as far as the walks below reach.
  size_t sorted = 0;
  if (k < n) {
    std::partial_sort(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(k), ids_.end(),
                      better);
    ids_.resize(k);
    sorted = k;
  }
  const double inv_t = 1.0 / p_.temperature;
  const double maxv = work_[sorted > 0 ? ids_[0] : argmax(work_)];
  auto prob = [&](int32_t id) { return std::exp((work_[id] - maxv) * inv_t); };
  double total = 0.0;  // in the order of ids_: descending, or by id (both defined)
  for (const int32_t id : ids_) total += prob(id);
  auto head = [&](size_t i) {
    if (i < sorted) return ids_[i];
    const size_t h = std::min(k, std::max<size_t>(64, 4 * sorted));
    const auto first = ids_.begin() + static_cast<std::ptrdiff_t>(sorted);
    const auto mid = ids_.begin() + static_cast<std::ptrdiff_t>(h);
    std::partial_sort(first, mid, ids_.end(), better);
    sorted = h;
    return ids_[i];
  };
  // Nucleus: the smallest prefix whose mass reaches top_p.
  size_t keep = k;
  double kept = total;
  if (p_.top_p < 1.0f) {
    double acc = 0.0, mass = 0.0;
    for (size_t i = 0; i < k; ++i) {
      const double pi = prob(head(i));
      mass += pi;
      acc += pi / total;
      if (acc >= p_.top_p) {
        keep = i + 1;
        kept = mass;
        break;
      }
    }
  }
  double r = next_unit() * kept;
  for (size_t i = 0; i < keep; ++i) {
    const int32_t id = head(i);
    r -= prob(id);
    if (r < 0.0) return id;
  }
  return head(keep - 1);  // rounding left r >= 0 after the last candidate
}

}  // namespace rwkvd::engine
