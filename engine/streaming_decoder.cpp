// StreamingDecoder (declared in tokenizer.h): turns ids into text pieces that never end inside
// a UTF-8 character, because a world token can (`E4 B8` and `B8` are tokens).
#include <cstdint>

#include "engine/tokenizer.h"
#include "engine/utf8.h"

namespace rwkvd::engine {
namespace {

// Number of bytes at the end of `s` that form a proper prefix of a well-formed UTF-8 sequence
// (0..3): exactly what a later token could still complete. A tail that cannot become valid
// (bad lead byte, bad second byte, a lone continuation) counts as 0 and is emitted as is.
size_t unfinished_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const auto b = static_cast<uint8_t>(s[n - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead byte
    const Utf8Lead lead = utf8_lead(b);
    // ASCII, a byte that cannot lead, or a sequence already whole (later continuations are stray).
    if (k >= lead.length) return 0;
    // The bytes after the lead are continuations; only the second has a narrower range.
    if (k >= 2 && !utf8_fits(lead, 1, static_cast<uint8_t>(s[n - k + 1]))) return 0;
    return k;
  }
  return 0;  // no lead in the last 3 bytes: complete 4-byte sequence or stray continuations
}

}  // namespace

std::string StreamingDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id);  // throws before changing anything for a bad id
  const size_t keep = unfinished_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace rwkvd::engine
