#include "worker/prefix_cache.h"

#include <algorithm>

namespace rwkvd::worker {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
uint64_t fnv_step(uint64_t h, int32_t t) {
  const auto u = static_cast<uint32_t>(t);
  for (int i = 0; i < 4; ++i) h = (h ^ ((u >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
  return h;
}

}  // namespace

size_t PrefixCache::lookup(std::span<const int32_t> tokens, size_t max_len,
                           std::vector<float>& out) {
  if (!enabled() || lengths_.empty()) return 0;
  max_len = std::min(max_len, tokens.size());
  // Hash every prefix once, then probe the cached lengths from the longest down.
  std::vector<uint64_t> h(max_len + 1);
  h[0] = kFnvOffset;
  for (size_t i = 0; i < max_len; ++i) h[i + 1] = fnv_step(h[i], tokens[i]);
  for (auto it = lengths_.rbegin(); it != lengths_.rend(); ++it) {
    const size_t len = it->first;
    if (len > max_len) continue;
    auto found = by_hash_.find(h[len]);
    if (found == by_hash_.end()) continue;
    const Entry& e = *found->second;
    if (e.tokens.size() != len || !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) {
      continue;
    }
    lru_.splice(lru_.begin(), lru_, found->second);
    out = e.state;
    return len;
  }
  return 0;
}

void PrefixCache::erase(std::list<Entry>::iterator it) {
  bytes_ -= entry_bytes(*it);
  by_hash_.erase(it->hash);
  if (--lengths_[it->tokens.size()] == 0) lengths_.erase(it->tokens.size());
  lru_.erase(it);
}

void PrefixCache::insert(std::span<const int32_t> prefix, std::vector<float> state) {
  if (!enabled() || prefix.empty()) return;
  uint64_t h = kFnvOffset;
  for (int32_t t : prefix) h = fnv_step(h, t);
  if (auto it = by_hash_.find(h); it != by_hash_.end()) erase(it->second);
  Entry e{std::vector<int32_t>(prefix.begin(), prefix.end()), std::move(state), h};
  const uint64_t need = entry_bytes(e);
  if (need > budget_) return;
  while (bytes_ + need > budget_ && !lru_.empty()) erase(std::prev(lru_.end()));
  lru_.push_front(std::move(e));
  by_hash_[h] = lru_.begin();
  lengths_[prefix.size()] += 1;
  bytes_ += need;
}

}  // namespace rwkvd::worker
