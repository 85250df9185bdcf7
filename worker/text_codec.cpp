#include "worker/text_codec.h"

namespace rwkvd::worker {

size_t utf8_complete_prefix(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of a sequence that the string cuts short.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return need > back ? n - back : n;
  }
  return n;  // no lead byte nearby: nothing to wait for (invalid bytes pass through)
}

}  // namespace rwkvd::worker
