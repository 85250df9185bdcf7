#pragma once
// CURVE security for the worker's socket (ZeroMQ's CurveZMQ). On its own, a CURVE server admits
// any client that knows its public key; so a ZAP handler (ZeroMQ's authentication protocol,
// RFC 27) admits only the clients whose public key is the user's own client key or one listed
// in authorized_keys (protocol/curve_keys.h). Used for every tcp endpoint, and for ipc with
// `serve --curve`.
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "protocol/curve_keys.h"

namespace rwkvd::worker {

// A fresh CURVE key pair (zmq_curve_keypair).
protocol::CurveKeyPair make_curve_pair();

class CurveAuth {
 public:
  // Loads the keys (making the server's and the user's client pair on first use) and starts the
  // ZAP handler on `ctx`; construct it before the socket it guards binds. Throws
  // std::runtime_error when ZeroMQ lacks CURVE or the key directory is not private.
  explicit CurveAuth(zmq::context_t& ctx);
  ~CurveAuth();
  CurveAuth(const CurveAuth&) = delete;
  CurveAuth& operator=(const CurveAuth&) = delete;

  // Makes `server` a CURVE server with our key, its handshakes checked by the handler.
  void apply(zmq::socket_t& server) const;
  const std::string& public_key() const { return server_.public_key; }
  size_t n_clients() const { return allowed_.size(); }

 private:
  void run();
  bool handle_one();

  protocol::CurveKeyPair server_;
  std::set<std::string> allowed_;  // client public keys, 32 raw bytes each
  zmq::socket_t zap_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rwkvd::worker
