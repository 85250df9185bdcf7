#include "worker/request_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

namespace rwkvd::worker {

std::string client_tag(const std::string& routing_id) {
  const bool printable =
      !routing_id.empty() && std::all_of(routing_id.begin(), routing_id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
      });
  if (printable) return routing_id.substr(0, 9);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (unsigned char c : routing_id.substr(0, 8)) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

void log_received(const std::string& client, const protocol::Request& req, size_t bytes) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  spdlog::debug("request {} {} from {}: {} bytes", req.id, protocol::op_name(req.op),
                client_tag(client), bytes);
}

void log_replied(const std::string& client, uint64_t id, protocol::Op op, double ms,
                 const protocol::Value& reply) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  std::string outcome = "ok";
  if (const protocol::Value* ok = reply.find("ok"); ok != nullptr && !ok->as_bool()) {
    const protocol::Value* code = reply.find("error")->find("code");
    outcome = protocol::error_name(static_cast<protocol::ErrorCode>(code->as_uint()));
  }
  spdlog::debug("reply {} {} to {}: {} in {:.2f} ms", id, protocol::op_name(op), client_tag(client),
                outcome, ms);
}

}  // namespace rwkvd::worker
