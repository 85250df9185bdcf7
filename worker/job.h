#pragma once
// What travels between the server thread and the engine thread.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "protocol/messages.h"

namespace rwkvd::worker {

using Clock = std::chrono::steady_clock;

// A decoded, validated request whose text inputs are already tokenized.
struct Job {
  std::string client;  // ROUTER identity of the sender
  protocol::Request req;
  Clock::time_point received;
};

// A reply on its way out. Tensors travel separately so the server can place them in the ring
// or inline; `body` is the reply map without them.
struct Outgoing {
  std::string client;
  uint64_t id = 0;
  protocol::Op op = protocol::Op::kInfo;
  protocol::Value body;
  std::vector<std::pair<std::string, engine::Tensor>> tensors;
  bool shm_ok = false;
  bool final = true;  // false for stream chunks (latency is counted on the final one)
  Clock::time_point received;
  // Tensors the engine thread already wrote into ring leases of the client (Scheduler::Reserve).
  std::vector<std::pair<std::string, protocol::Value>> placed;
};

// The successful reply to `job` (fields and tensors still to add). shm_ok: its tensors may go
// into the client's ring (the request allowed it); final: false for a stream chunk.
inline Outgoing ok_reply_to(const Job& job, bool shm_ok, bool final = true) {
  Outgoing o;
  o.client = job.client;
  o.id = job.req.id;
  o.op = job.req.op;
  o.body = protocol::ok_reply(job.req.id);
  o.shm_ok = shm_ok;
  o.final = final;
  o.received = job.received;
  return o;
}

}  // namespace rwkvd::worker
