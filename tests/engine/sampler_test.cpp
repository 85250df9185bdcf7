// The sampler: greedy, seeded determinism, top-k/top-p truncation, penalties.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rwkvd::engine
