#pragma once
// The worker's view of a tokenizer: text to ids and back. The serve command adapts the engine's
// WorldTokenizer to it; tests may use a byte codec. Implementations must be thread-safe for
// concurrent const calls (the server thread tokenizes, the engine thread detokenizes).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.h"

namespace rwkvd::worker {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The raw bytes of the ids (may end inside a UTF-8 sequence).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
};

// The request's text inputs as tokens, one input after another, the total checked against
// `max_tokens` after each: an input that takes it past the limit is refused (too_large) before
// the rest are tokenized. Throws ProtocolError (also unsupported without a codec, bad_value for a
// text of no tokens).
void tokenize_inputs(protocol::Request& req, const TextCodec* codec, uint32_t max_tokens);

// Bytes of the request's texts: past kTokenizeAsideBytes the worker tokenizes them on a thread
// of its own (StateReader), not the one that serves the socket (a 60 MiB embed took it 1-2 s).
uint64_t text_bytes(const protocol::Request& req);
inline constexpr uint64_t kTokenizeAsideBytes = 64u << 10;

// Bytes of `s` that form complete UTF-8 sequences at its start; the rest (at most 3 bytes of an
// unfinished sequence at the end) is held back by streaming.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace rwkvd::worker
