// The prefix cache: longest match, exact keys, LRU eviction within the budget.
#include <gtest/gtest.h>

#include "worker/prefix_cache.h"
#include "worker/text_codec.h"

namespace rwkvd::worker {
namespace {

TEST(PrefixCache, LongestPrefixWins) {
  PrefixCache c(1 << 20);
  c.insert(std::vector<int32_t>{1, 2}, {2.f});
  c.insert(std::vector<int32_t>{1, 2, 3, 4}, {4.f});
  std::vector<float> st;
  const std::vector<int32_t> q = {1, 2, 3, 4, 5};
  EXPECT_EQ(c.lookup(q, 5, st), 4u);
  EXPECT_EQ(st, std::vector<float>{4.f});
  EXPECT_EQ(c.lookup(q, 3, st), 2u);  // max_len caps the match
  EXPECT_EQ(c.lookup(std::vector<int32_t>{9, 9, 9}, 3, st), 0u);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedWithinBudget) {
  // Each entry: 1 token (4 bytes) + 4 floats (16 bytes) = 20 bytes; budget for two.
  PrefixCache c(40);
  c.insert(std::vector<int32_t>{1}, std::vector<float>(4, 1.f));
  c.insert(std::vector<int32_t>{2}, std::vector<float>(4, 2.f));
  std::vector<float> st;
  EXPECT_EQ(c.lookup(std::vector<int32_t>{1}, 1, st), 1u);  // 1 is now the most recent
  c.insert(std::vector<int32_t>{3}, std::vector<float>(4, 3.f));
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.lookup(std::vector<int32_t>{2}, 1, st), 0u);
  EXPECT_EQ(c.lookup(std::vector<int32_t>{1}, 1, st), 1u);
  EXPECT_LE(c.bytes(), 40u);
  PrefixCache off(0);
  off.insert(std::vector<int32_t>{1}, {1.f});
  EXPECT_EQ(off.entries(), 0u);
}

TEST(Utf8, HoldsBackAnUnfinishedSequence) {
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xc3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xc3\xa9"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xe2\x82"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xf0\x9f\x98\x80"), 5u);
}

}  // namespace
}  // namespace rwkvd::worker
