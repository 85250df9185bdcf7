// Fuzzes the worker's request path on arbitrary bytes: msgpack decode, request parse and
// validation (decode_request, validate_for_model), and the client's reply decode. Whatever is
// accepted must re-encode to bytes that decode to the same request (encode is decode's inverse
// on everything the worker lets through). Errors must be ProtocolErrors, never a crash or leak.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/messages.h"

namespace {

using namespace rwkvd::protocol;

// Small limits reach the limit checks with small inputs; the defaults reach the rest.
const Limits& small_limits() {
  static const Limits l = [] {
    Limits s;
    s.max_message_bytes = 4096;
    s.max_tokens = 64;
    s.max_batch = 4;
    s.max_text_bytes = 256;
    s.max_new_tokens = 128;
    s.max_stop = 2;
    s.max_stop_bytes = 8;
    s.max_leases = 8;
    return s;
  }();
  return l;
}

void check_request(std::string_view bytes, const Limits& limits) {
  Request req;
  try {
    req = decode_request(bytes, limits);
  } catch (const RequestError&) {
    return;
  }
  try {
    validate_for_model(req, ModelShape{65536, 4 * 66 * 64});
  } catch (const ProtocolError&) {
    // Rejected with a code: fine.
  }
  const std::string again = encode_request(req);
  Request back;
  try {
    back = decode_request(again, Limits{});
  } catch (const RequestError&) {
    std::abort();  // an accepted request re-encoded into something the worker refuses
  }
  if (encode_request(back) != again) std::abort();  // not a fixed point
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check_request(bytes, Limits{});
  check_request(bytes, small_limits());
  try {
    const Reply r = decode_reply(bytes);
    // The client looks for tensors in replies; parse any map it could find.
    if (const Value* e = r.body.find("embeddings")) (void)parse_tensor(*e);
  } catch (const ProtocolError&) {
  }
  return 0;
}
