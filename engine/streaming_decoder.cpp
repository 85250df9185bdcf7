// StreamingDecoder (declared in tokenizer.h): turns ids into text pieces that never end inside
// a UTF-8 character, because a world token can (`E4 B8` and `B8` are tokens).
#include <cstdint>

#include "engine/tokenizer.h"

namespace rwkvd::engine {
namespace {

// Number of bytes at the end of `s` that form a proper prefix of a well-formed UTF-8 sequence
// (0..3): exactly what a later token could still complete. A tail that cannot become valid
// (bad lead byte, bad second byte, a lone continuation) counts as 0 and is emitted as is.
size_t unfinished_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const auto lead = static_cast<uint8_t>(s[n - k]);
    if ((lead & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead byte
    size_t need = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the range the second byte must be in
    if (lead >= 0xC2 && lead <= 0xDF) need = 2;
    if (lead >= 0xE0 && lead <= 0xEF) need = 3;
    if (lead >= 0xF0 && lead <= 0xF4) need = 4;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // beyond U+10FFFF
    if (k >= need) return 0;      // ASCII, an invalid lead, complete, or overlong run
    if (k >= 2) {
      const auto second = static_cast<uint8_t>(s[n - k + 1]);
      if (second < lo || second > hi) return 0;
    }
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
