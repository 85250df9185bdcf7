#pragma once
// How a client reaches its worker: the endpoint checked (an ipc socket only where no other user
// can have put it, protocol/owned_path.h), CURVE keys where the worker requires them
// (protocol/curve_keys.h), and the words for "there is no worker there".
#include <chrono>
#include <string>
#include <zmq.hpp>

namespace rwkvd::client {

// How long a fresh connection's hello may go unanswered before the client says there is no
// worker: a live worker answers from its socket thread at once. Once ZeroMQ's handshake with
// the other end has succeeded (a live process there, and with CURVE one that knows our key),
// the wait grows to kHelloPatience, as long as a silent worker gets before it is presumed gone
// (3 heartbeat intervals, PROTOCOL.md): a loaded machine is not "no worker".
inline constexpr std::chrono::milliseconds kHelloWait{1000};
inline constexpr std::chrono::milliseconds kHelloPatience{3000};

// A DEALER connected to `endpoint`, after the checks, whose worker answered a hello.
// Throws protocol::UnsafePathError for an endpoint another user could have set up,
// NoWorkerError (naming the endpoint and how to start a worker) when no socket file exists or
// the hello goes unanswered, std::runtime_error for missing CURVE keys. server_key "" =
// $RWKVD_SERVER_KEY or the user's own worker's.
zmq::socket_t open_dealer(zmq::context_t& ctx, const std::string& endpoint,
                          const std::string& routing_id, const std::string& server_key);

}  // namespace rwkvd::client
