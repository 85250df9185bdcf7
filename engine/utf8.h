#pragma once
// The UTF-8 rules the tokenizer needs (vocab literals, streaming decode): which bytes start a
// sequence, how long it is, and which second bytes keep it well-formed (RFC 3629: no overlongs,
// no surrogates, nothing past U+10FFFF).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rwkvd::engine {

struct Utf8Lead {
  uint8_t length = 0;  // 1..4; 0 when the byte cannot start a sequence
  uint8_t second_lo = 0x80;
  uint8_t second_hi = 0xBF;
};

constexpr Utf8Lead utf8_lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // below: overlong
  if (b == 0xED) return {3, 0x80, 0x9F};  // above: surrogates
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // below: overlong
  if (b == 0xF4) return {4, 0x80, 0x8F};  // above: past U+10FFFF
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  return {};  // continuation bytes, C0, C1, F5..FF
}

// Whether s[i + k] may stand at position k (>= 1) of the sequence that `lead` starts.
constexpr bool utf8_fits(const Utf8Lead& lead, size_t k, uint8_t b) {
  return k == 1 ? b >= lead.second_lo && b <= lead.second_hi : (b & 0xC0) == 0x80;
}

// Length of the well-formed sequence at s[i..], or 0 when there is none.
constexpr size_t utf8_sequence_length(std::string_view s, size_t i) {
  const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(s[i]));
  if (lead.length == 0 || i + lead.length > s.size()) return 0;
  for (size_t k = 1; k < lead.length; ++k) {
    if (!utf8_fits(lead, k, static_cast<uint8_t>(s[i + k]))) return 0;
  }
  return lead.length;
}

}  // namespace rwkvd::engine
