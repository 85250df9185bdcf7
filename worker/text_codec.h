#pragma once
// The worker's view of a tokenizer: text to ids and back. The serve command adapts the engine's
// WorldTokenizer to it; tests may use a byte codec. Implementations must be thread-safe for
// concurrent const calls (the server thread tokenizes, the engine thread detokenizes).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::worker {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The raw bytes of the ids (may end inside a UTF-8 sequence).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
};

// Bytes of `s` that form complete UTF-8 sequences at its start; the rest (at most 3 bytes of an
// unfinished sequence at the end) is held back by streaming.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace rwkvd::worker
