#include "engine/byte_trie.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>

#include "engine/error.h"

namespace rwkvd::engine {

// Places the nodes of the trie into ByteTrie's arrays breadth first, so the short, hot prefixes
// share the low slots. Each node's children get the first base that puts all of them on free
// slots; free slots are kept in a linked list so the search skips the occupied ones.
class ByteTrieBuilder {
 public:
  ByteTrieBuilder(ByteTrie& trie, std::span<const std::string_view> tokens,
                  const std::string& source)
      : trie_(trie), tokens_(tokens), source_(source) {}

  void build() {
    sort_and_validate();
    grow(1024);
    take(ByteTrie::kRoot);
    struct Pending {
      uint32_t node, lo, hi, depth;
    };
    std::deque<Pending> queue{{ByteTrie::kRoot, 0, static_cast<uint32_t>(sorted_.size()), 0}};
    std::vector<uint8_t> labels;
    std::vector<uint32_t> starts;
    while (!queue.empty()) {
      auto [node, lo, hi, depth] = queue.front();
      queue.pop_front();
      ++trie_.node_count_;
      // Sorted order puts the key equal to this node's prefix first. A node that is not a token
      // keeps what its parent passed down.
      if (lo < hi && tokens_[sorted_[lo]].size() == depth) {
        trie_.matches_[node] = {static_cast<int32_t>(sorted_[lo]), depth};
        ++lo;
      }
      labels.clear();
      starts.clear();
      for (uint32_t i = lo; i < hi; ++i) {
        const auto c = static_cast<uint8_t>(tokens_[sorted_[i]][depth]);
        if (labels.empty() || labels.back() != c) {
          labels.push_back(c);
          starts.push_back(i);
        }
      }
      if (labels.empty()) continue;  // a leaf keeps base 0: no slot has it as parent
      const uint32_t base = find_base(labels);
      trie_.units_[node].base = base;
      max_base_ = std::max(max_base_, base);
      starts.push_back(hi);
      for (size_t k = 0; k < labels.size(); ++k) {
        const uint32_t child = base + labels[k];
        take(child);
        trie_.units_[child].check = node;
        trie_.matches_[child] = trie_.matches_[node];
        queue.push_back({child, starts[k], starts[k + 1], depth + 1});
      }
    }
    // The encoder reads units_[base + c] for any node and byte without a bounds check; the root's
    // base must be 1 so that its 256 children are slots 1..256 (see encode()).
    if (trie_.units_[ByteTrie::kRoot].base != 1) fail("internal: root not placed at base 1");
    trie_.units_.resize(std::max<size_t>(trie_.units_.size(), size_t{max_base_} + 256));
    trie_.matches_.resize(trie_.units_.size());
  }

 private:
  enum : uint8_t { kListed, kUsed, kDropped };  // kDropped: free but no longer searched
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  // A free slot that failed this many searches is dropped from the list: it stays free (some
  // later base may still land on it), but scanning it forever would make the build quadratic.
  static constexpr uint8_t kMaxMisses = 16;

  [[noreturn]] void fail(const std::string& msg) const { throw EngineError(source_ + ": " + msg); }

  void sort_and_validate() {
    std::array<bool, 256> single{};
    for (size_t id = 0; id < tokens_.size(); ++id) {
      const std::string_view t = tokens_[id];
      if (t.empty()) continue;
      sorted_.push_back(static_cast<uint32_t>(id));
      if (t.size() == 1) single[static_cast<uint8_t>(t[0])] = true;
    }
    for (int b = 0; b < 256; ++b) {
      if (!single[b]) {
        fail("vocab has no token for the single byte " + hex_byte(b) +
             "; every byte must be a token so that any input can be encoded");
      }
    }
    // std::string_view compares bytes as unsigned, so children come out in byte order.
    std::sort(sorted_.begin(), sorted_.end(),
              [&](uint32_t a, uint32_t b) { return tokens_[a] < tokens_[b]; });
    for (size_t i = 1; i < sorted_.size(); ++i) {
      if (tokens_[sorted_[i - 1]] == tokens_[sorted_[i]]) {
        const auto [a, b] = std::minmax(sorted_[i - 1], sorted_[i]);
        fail("token ids " + std::to_string(a) + " and " + std::to_string(b) +
             " have the same bytes; greedy matching needs each byte string once");
      }
    }
  }

  static std::string hex_byte(int b) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("0x") + kHex[b >> 4] + kHex[b & 15];
  }

  void grow(size_t new_size) {
    if (new_size >= kNone) fail("vocab too large for a 32-bit trie");
    const auto old = static_cast<uint32_t>(trie_.units_.size());
    trie_.units_.resize(new_size);
    trie_.matches_.resize(new_size);
    next_.resize(new_size, kNone);
    prev_.resize(new_size, kNone);
    state_.resize(new_size, kListed);
    misses_.resize(new_size, 0);
    for (uint32_t i = old; i < new_size; ++i) {
      prev_[i] = tail_;
      if (tail_ == kNone) {
        head_ = i;
      } else {
        next_[tail_] = i;
      }
      tail_ = i;
    }
  }

  void unlink(uint32_t i) {
    (prev_[i] == kNone ? head_ : next_[prev_[i]]) = next_[i];
    (next_[i] == kNone ? tail_ : prev_[next_[i]]) = prev_[i];
  }

  void take(uint32_t i) {
    if (state_[i] == kListed) unlink(i);
    state_[i] = kUsed;
  }

  bool fits(uint32_t base, const std::vector<uint8_t>& labels) {
    const size_t need = size_t{base} + labels.back() + 1;
    if (need > trie_.units_.size()) grow(std::max(need, trie_.units_.size() * 3 / 2));
    for (uint8_t c : labels) {
      if (state_[base + c] == kUsed) return false;
    }
    return true;
  }

  // Bases start at 1: base 0 is what leaves keep, and the root must land on 1.
  uint32_t find_base(const std::vector<uint8_t>& labels) {
    const uint32_t first = labels.front();
    for (uint32_t p = head_; p != kNone;) {
      const uint32_t next = next_[p];
      if (p > first) {
        if (fits(p - first, labels)) return p - first;
        if (++misses_[p] >= kMaxMisses) {
          unlink(p);
          state_[p] = kDropped;
        }
      }
      p = next;
    }
    // Nothing fits among the listed slots: start past the end, where everything is free.
    const auto base = static_cast<uint32_t>(std::max<size_t>(trie_.units_.size() - first, 1));
    if (!fits(base, labels)) fail("internal: no base past the end");
    return base;
  }

  ByteTrie& trie_;
  std::span<const std::string_view> tokens_;
  const std::string& source_;
  std::vector<uint32_t> sorted_;  // ids with bytes, in byte order
  std::vector<uint32_t> next_, prev_;
  std::vector<uint8_t> state_, misses_;
  uint32_t head_ = kNone, tail_ = kNone;
  uint32_t max_base_ = 0;
};

ByteTrie::ByteTrie(std::span<const std::string_view> tokens, const std::string& source) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw EngineError(source + ": " + std::to_string(tokens.size()) +
                      " tokens do not fit in 32-bit ids");
  }
  ByteTrieBuilder(*this, tokens, source).build();
  units_.shrink_to_fit();
  matches_.shrink_to_fit();
}

void ByteTrie::encode(std::string_view bytes, std::vector<int32_t>& out) const {
  const Unit* u = units_.data();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t* const end = p + bytes.size();
  // Every single byte is a token (checked at build), so the first step needs no check. The walk
  // then goes on while an edge exists; the node where it stops knows the longest token on its
  // path, which is the greedy answer (never empty: at least the first byte).
  const uint32_t root_base = u[kRoot].base;
  while (p < end) {
    uint32_t s = root_base + *p;
    for (const uint8_t* q = p + 1; q < end; ++q) {
      const uint32_t t = u[s].base + *q;
      if (u[t].check != s) break;
      s = t;
    }
    const Match m = matches_[s];
    out.push_back(m.token);
    p += m.length;
  }
}

}  // namespace rwkvd::engine
