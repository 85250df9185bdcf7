#include "worker/text_codec.h"

namespace rwkvd::worker {

void tokenize_inputs(protocol::Request& req, const TextCodec* codec, uint32_t max_tokens) {
  using protocol::ErrorCode;
  using protocol::ProtocolError;
  size_t total = 0;
  for (auto& in : req.inputs) {
    if (in.text) {
      if (codec == nullptr) {
        throw ProtocolError(ErrorCode::kUnsupported, "this model has no tokenizer; send token ids");
      }
      in.tokens = codec->encode(*in.text);
      in.text.reset();
      if (in.tokens.empty()) throw ProtocolError(ErrorCode::kBadValue, "text encodes to no tokens");
    }
    total += in.tokens.size();
    if (total > max_tokens) {
      throw ProtocolError(ErrorCode::kTooLarge, "more than " + std::to_string(max_tokens) +
                                                    " tokens (the limit), " +
                                                    std::to_string(total) + " by input " +
                                                    std::to_string(&in - req.inputs.data()));
    }
  }
}

uint64_t text_bytes(const protocol::Request& req) {
  uint64_t n = 0;
  for (const auto& in : req.inputs) n += in.text ? in.text->size() : 0;
  return n;
}

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
