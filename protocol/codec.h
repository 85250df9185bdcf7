#pragma once
// msgpack <-> Value. Decoding caps every size before anything is allocated for it: the message,
// each array/map/str/bin length and the nesting depth (msgpack-c's unpack_limit checks the
// declared length before it reserves memory).
#include <cstddef>
#include <string>
#include <string_view>

#include "protocol/value.h"

namespace rwkvd::protocol {

struct DecodeLimits {
  size_t max_bytes = 64u << 20;  // whole message
  size_t max_array = 1u << 20;   // elements of one array
  size_t max_map = 64;           // pairs of one map
  size_t max_str = 4u << 20;     // bytes of one string
  size_t max_bin = 64u << 20;    // bytes of one bin
  size_t max_depth = 8;          // nesting
};

std::string encode(const Value& v);
// Appends v's encoding to out (lets a caller reserve once for big payloads).
void encode_to(const Value& v, std::string& out);
// Throws ProtocolError(kBadMessage / kTooLarge) on malformed input, trailing bytes, extension
// types, non-string map keys, duplicate keys or a limit exceeded.
Value decode(std::string_view bytes, const DecodeLimits& limits = {});

// The uint under key "id" of the top-level map `bytes` holds, where a scan finds one before
// anything it cannot read; 0 otherwise. Nothing is built: for the error reply to a message that
// decode() refuses (too large, nested too deeply), so that it still names its request.
uint64_t peek_id(std::string_view bytes);

}  // namespace rwkvd::protocol
