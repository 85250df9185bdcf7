#pragma once
// `--log-level debug`: a line per request as it arrives (op, id, client, bytes) and as its final
// reply leaves (op, id, client, outcome, time since it arrived). Costs nothing at other levels.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/messages.h"

namespace rwkvd::worker {

// A client's routing identity for people: printable ids as they are (ours are "c" and 32 hex
// digits; the first 9 characters tell clients apart), others in hex.
std::string client_tag(const std::string& routing_id);
void log_received(const std::string& client, const protocol::Request& req, size_t bytes);
// `reply`: the reply's body (ok, or its error's code).
void log_replied(const std::string& client, uint64_t id, protocol::Op op, double ms,
                 const protocol::Value& reply);

}  // namespace rwkvd::worker
