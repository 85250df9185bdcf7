#pragma once
// A double-array trie over token bytes, built once and then only read: two flat arrays, so the
// greedy longest match costs one add, two loads and one compare per input byte and allocates
// nothing. See docs/TOKENIZER.md for the layout.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::engine {

class ByteTrie {
 public:
  // `tokens[id]` are the bytes of token `id`; an empty entry has no bytes and is never matched.
  // Throws EngineError, messages prefixed with `source`, when two ids share the same bytes or
  // when some single byte has no token (then some input could not be encoded).
  ByteTrie(std::span<const std::string_view> tokens, const std::string& source);

  // Greedy longest match: appends the ids of `bytes` to `out`. Never fails.
  void encode(std::string_view bytes, std::vector<int32_t>& out) const;

  size_t node_count() const { return node_count_; }
  size_t array_size() const { return units_.size(); }

 private:
  // One slot of the double array. Slot `t` is a child of node `s` by byte `c` exactly when
  // t == units_[s].base + c and units_[t].check == s. 8 bytes, so the walk's working set stays
  // in cache.
  struct Unit {
    uint32_t base = 0;
    uint32_t check = kFree;
  };
  // Per slot, read once per emitted token: the longest token on the node's own path (itself or
  // an ancestor), so when the walk stops the answer is read off the last node with no per-byte
  // bookkeeping in the loop.
  struct Match {
    int32_t token = -1;   // the longest token that is a prefix of this node's bytes, or -1
    uint32_t length = 0;  // its length in bytes
  };
  static constexpr uint32_t kFree = 0xFFFFFFFFu;  // no node has this index
  static constexpr uint32_t kRoot = 0;

  std::vector<Unit> units_;
  std::vector<Match> matches_;  // parallel to units_
  size_t node_count_ = 0;

  friend class ByteTrieBuilder;
};

}  // namespace rwkvd::engine
