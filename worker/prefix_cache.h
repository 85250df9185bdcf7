#pragma once
// States after common prompt prefixes, so a prompt that starts like an earlier one skips that
// part of the prefill. Keyed by the exact token prefix (hash + full comparison), evicted least
// recently used first when the memory budget is exceeded. Engine thread only.
#include <cstdint>
#include <list>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

namespace rwkvd::worker {

class PrefixCache {
 public:
  explicit PrefixCache(uint64_t budget_bytes) : budget_(budget_bytes) {}
  bool enabled() const { return budget_ > 0; }

  // The longest cached prefix of tokens[0, max_len): its length (0 = none), its state in `out`.
  size_t lookup(std::span<const int32_t> tokens, size_t max_len, std::vector<float>& out);
  void insert(std::span<const int32_t> prefix, std::vector<float> state);

  uint64_t entries() const { return lru_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t budget() const { return budget_; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<float> state;
    uint64_t hash;
  };
  static uint64_t entry_bytes(const Entry& e) {
    return e.tokens.size() * sizeof(int32_t) + e.state.size() * sizeof(float);
  }
  void erase(std::list<Entry>::iterator it);

  uint64_t budget_;
  uint64_t bytes_ = 0;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_hash_;
  std::map<size_t, size_t> lengths_;  // prefix length -> entries of that length (probe set)
};

}  // namespace rwkvd::worker
