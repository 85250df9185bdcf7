#pragma once
// How a client reaches its worker: the endpoint checked (an ipc socket only where no other user
// can have put it, protocol/owned_path.h), CURVE keys where the worker requires them
// (protocol/curve_keys.h), and the words for "there is no worker there".
#include <chrono>
#include <string>
#include <zmq.hpp>

namespace rwkvd::client {

// How long the first hello on a fresh connection may take before the client says there is no
// worker: a live worker answers a hello from its socket thread in well under a millisecond.
inline constexpr std::chrono::milliseconds kHelloWait{1000};

// A DEALER connected to `endpoint`, after the checks. Throws protocol::UnsafePathError for an
// endpoint another user could have set up, NoWorkerError when no socket file exists,
// std::runtime_error for missing CURVE keys. server_key "" = $RWKVD_SERVER_KEY or the user's.
zmq::socket_t open_dealer(zmq::context_t& ctx, const std::string& endpoint,
                          const std::string& routing_id, const std::string& server_key);

// "... start one with `rwkvd serve --model FILE.gguf [--endpoint E]`": the message of a
// NoWorkerError when the worker did not answer its hello in time.
std::string no_answer_message(const std::string& endpoint);

}  // namespace rwkvd::client
