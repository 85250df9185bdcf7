// The sampler: greedy, seeded determinism, top-k/top-p truncation, penalties; the draw against
// a plain full-sort implementation and against the softmax it samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "engine/sampler.h"

namespace rwkvd::engine {
namespace {

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  const std::vector<float> l = {0.f, 3.f, 1.f, 3.f};
  EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  const std::vector<float> l(100, 0.0f);  // uniform
  SamplingParams p;
  p.seed = 7;
  Sampler a(p), b(p);
  p.seed = 8;
  Sampler c(p);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.sample(l));
    tb.push_back(b.sample(l));
    tc.push_back(c.sample(l));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampler, TopKAndTopPKeepOnlyTheHead) {
  std::vector<float> l = {5.f, 4.f, 3.f, -20.f, -20.f};
  SamplingParams p;
  p.top_k = 2;
  Sampler k(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(k.sample(l));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
  SamplingParams q;
  q.top_p = 0.5f;  // token 0 alone has ~66% of the mass
  Sampler pp(q);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(pp.sample(l), 0);
}

TEST(Sampler, PenaltiesDiscourageRepeats) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 2.0f;
  Sampler s(p);
  const std::vector<float> l = {1.0f, 0.5f};
  EXPECT_EQ(s.sample(l), 0);
  EXPECT_EQ(s.sample(l), 1);  // 1 - 2 < 0.5
}

TEST(Argmax, LowestIdOnTiesNanNeverWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(argmax(std::vector<float>{0.f, 3.f, 1.f, 3.f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{nan, -1.f, nan, -0.5f}), 3);
  EXPECT_EQ(argmax(std::vector<float>{nan, nan}), 0);
  EXPECT_EQ(argmax(std::vector<float>{-inf, -inf, -inf}), 0);
  // Past the 16-wide blocks, in and after them, against std::max_element.
  std::mt19937 g(3);
  std::normal_distribution<float> d(0.f, 3.f);
  for (const size_t n : {1u, 15u, 16u, 17u, 100u, 65536u}) {
    std::vector<float> v(n);
    for (auto& x : v) x = std::round(d(g) * 4.f) / 4.f;  // ties likely
    const auto want = std::max_element(v.begin(), v.end()) - v.begin();
    EXPECT_EQ(argmax(v), want) << "n = " << n;
  }
}

// The draw as it was before it sorted only what it needs: every candidate sorted, the masses
// summed in that order. The sampler must pick the same tokens from the same seed.
int32_t full_sort_draw(std::span<const float> w, const SamplingParams& p, double u) {
  const size_t n = w.size();
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
  const size_t k = (p.top_k == 0 || p.top_k > n) ? n : p.top_k;
  std::vector<double> probs(k);
  double sum = 0.0;
  for (size_t i = 0; i < k; ++i) {
    probs[i] = std::exp((w[ids[i]] - w[ids[0]]) / static_cast<double>(p.temperature));
    sum += probs[i];
  }
  size_t keep = k;
  double acc = 0.0;
  for (size_t i = 0; i < k && p.top_p < 1.0f; ++i) {
    acc += probs[i] / sum;
    if (acc >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  double r = u * std::accumulate(probs.begin(), probs.begin() + static_cast<long>(keep), 0.0);
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r < 0.0) return ids[i];
  }
  return ids[keep - 1];
}

TEST(Sampler, DrawsWhatAFullSortDraws) {
  std::mt19937 g(5);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> l(65536);
  for (auto& x : l) x = d(g);
  for (const auto& [t, top_k, top_p] : {std::tuple{1.0f, 0u, 1.0f},
                                        {0.8f, 0u, 0.9f},
                                        {1.5f, 40u, 1.0f},
                                        {2.0f, 1000u, 0.5f},
                                        {20.0f, 0u, 1.0f}}) {  // flat: the sorted head widens
    SamplingParams p;
    p.temperature = t;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = 11;
    Sampler s(p), uniform(p);  // the same stream of draws
    for (int i = 0; i < 25; ++i) {
      ASSERT_EQ(s.sample(l), full_sort_draw(l, p, uniform.next_unit()))
          << "T " << t << " top_k " << top_k << " top_p " << top_p << " draw " << i;
    }
  }
}

// Token i of logits log(w_i) comes w_i / sum(w) of the time: within 5 standard deviations over
// 40000 draws (a wrong walk or mass is off by far more).
TEST(Sampler, FollowsTheSoftmax) {
  const std::vector<double> w = {8, 4, 2, 1, 1};
  std::vector<float> l;
  for (const double x : w) l.push_back(static_cast<float>(std::log(x)));
  SamplingParams p;
  p.seed = 3;
  Sampler s(p);
  constexpr int kDraws = 40000;
  std::vector<int> count(w.size(), 0);
  for (int i = 0; i < kDraws; ++i) count[static_cast<size_t>(s.sample(l))] += 1;
  for (size_t i = 0; i < w.size(); ++i) {
    const double q = w[i] / 16.0, sd = std::sqrt(kDraws * q * (1 - q));
    EXPECT_NEAR(count[i], kDraws * q, 5 * sd) << "token " << i;
  }
}

}  // namespace
}  // namespace rwkvd::engine
