#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
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

int32_t Sampler::sample(std::span<const float> logits) {
  const size_t n = logits.size();
  work_.assign(logits.begin(), logits.end());
  for (const auto& [tok, count] : counts_) {
    if (tok >= 0 && static_cast<size_t>(tok) < n) {
      work_[tok] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(count);
    }
  }
  int32_t chosen = 0;
  if (p_.temperature <= 0.0f) {
    chosen = static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  } else {
    ids_.resize(n);
    std::iota(ids_.begin(), ids_.end(), 0);
    // Candidates by descending logit (ties by id, so the order is total and reproducible).
    auto better = [&](int32_t a, int32_t b) {
      return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
    };
    size_t k = (p_.top_k == 0 || p_.top_k > n) ? n : p_.top_k;
    std::partial_sort(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(k), ids_.end(),
                      better);
    ids_.resize(k);
    const double inv_t = 1.0 / p_.temperature;
    const double maxv = work_[ids_[0]];
    std::vector<double> probs(k);
    double sum = 0.0;
    for (size_t i = 0; i < k; ++i) {
      probs[i] = std::exp((work_[ids_[i]] - maxv) * inv_t);
      sum += probs[i];
    }
    // Nucleus: the smallest prefix whose mass reaches top_p.
    size_t keep = k;
    if (p_.top_p < 1.0f) {
      double acc = 0.0;
      for (size_t i = 0; i < k; ++i) {
        acc += probs[i] / sum;
        if (acc >= p_.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    double kept = 0.0;
    for (size_t i = 0; i < keep; ++i) kept += probs[i];
    double r = next_unit() * kept;
    chosen = ids_[keep - 1];
    for (size_t i = 0; i < keep; ++i) {
      r -= probs[i];
      if (r < 0.0) {
        chosen = ids_[i];
        break;
      }
    }
  }
  accept(chosen);
  return chosen;
}

}  // namespace rwkvd::engine
