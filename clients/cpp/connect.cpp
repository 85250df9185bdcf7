#include "clients/cpp/connect.h"

#include <sys/stat.h>

#include <array>
#include <cstdlib>

#include "clients/cpp/client.h"
#include "protocol/codec.h"
#include "protocol/curve_keys.h"
#include "protocol/endpoint.h"
#include "protocol/messages.h"
#include "protocol/owned_path.h"
#include "protocol/shm_ring.h"

namespace rwkvd::client {
namespace {

std::string how_to_start(const std::string& endpoint) {
  std::string cmd = "rwkvd serve --model FILE.gguf";
  if (endpoint != protocol::default_endpoint(false)) cmd += " --endpoint " + endpoint;
  return "start one with `" + cmd + "`";
}

bool wants_curve(const std::string& endpoint) {
  const char* env = std::getenv("RWKVD_CURVE");
  return endpoint.rfind("tcp://", 0) == 0 || (env != nullptr && std::string(env) == "1");
}

// Our side of CURVE: the worker's public key and this user's client pair.
void set_curve(zmq::socket_t& sock, const std::string& endpoint, std::string server_key) {
  const std::string dir = protocol::open_curve_key_dir();
  const auto client = protocol::read_curve_pair(dir, "client");
  if (server_key.empty()) {
    const char* env = std::getenv("RWKVD_SERVER_KEY");
    if (env != nullptr && *env != '\0') {
      server_key = env;
    } else if (const auto server = protocol::read_curve_pair(dir, "server")) {
      server_key = server->public_key;
    }
  }
  if (!client || server_key.empty()) {
    throw std::runtime_error(
        endpoint + " needs CURVE keys and " + dir + " has " +
        (client ? "no server.key" : "no client.key") +
        ": a worker of this user makes both on its first tcp start; on another host, copy "
        "client.key from the worker's host and give its server key in RWKVD_SERVER_KEY");
  }
  if (!protocol::is_z85_key(server_key)) {
    throw std::runtime_error("the server key must be 40 Z85 characters: " + server_key);
  }
  sock.set(zmq::sockopt::curve_serverkey, server_key);
  sock.set(zmq::sockopt::curve_publickey, client->public_key);
  sock.set(zmq::sockopt::curve_secretkey, client->secret_key);
}

}  // namespace

// Waits for any answer to a hello on `sock` (connected after the monitor on `monitor_ep` was
// set up): kHelloWait, or kHelloPatience once that monitor reports the ZeroMQ handshake done.
void probe(zmq::context_t& ctx, zmq::socket_t& sock, const std::string& monitor_ep,
           const std::string& endpoint) {
  zmq::socket_t events(ctx, zmq::socket_type::pair);
  events.connect(monitor_ep);
  protocol::Request hello;
  hello.op = protocol::Op::kHello;  // id 0: any reply at all will do
  const std::string bytes = protocol::encode_request(hello);
  sock.send(zmq::buffer(bytes), zmq::send_flags::none);
  const auto start = std::chrono::steady_clock::now();
  auto deadline = start + kHelloWait;
  bool shook_hands = false;
  for (auto now = start; now < deadline; now = std::chrono::steady_clock::now()) {
    std::array<zmq::pollitem_t, 2> items{
        {{sock.handle(), 0, ZMQ_POLLIN, 0}, {events.handle(), 0, ZMQ_POLLIN, 0}}};
    zmq::poll(items.data(), items.size(),
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    if ((items[0].revents & ZMQ_POLLIN) != 0) {
      zmq::message_t reply;
      (void)sock.recv(reply);
      if (protocol::decode_reply(reply.to_string_view()).heartbeat) continue;
      zmq_socket_monitor(sock.handle(), nullptr, 0);
      return;
    }
    if ((items[1].revents & ZMQ_POLLIN) != 0) {
      zmq::message_t frame;
      while (events.recv(frame, zmq::recv_flags::dontwait)) {
      }
      shook_hands = true;
      deadline = start + kHelloPatience;
    }
  }
  zmq_socket_monitor(sock.handle(), nullptr, 0);
  throw NoWorkerError(
      "no answer from " + endpoint + " to a hello within " +
      std::to_string((shook_hands ? kHelloPatience : kHelloWait).count()) + " ms: " +
      (shook_hands
           ? std::string("a process accepted the connection but did not answer (a stuck "
                         "or overloaded worker?)")
           : std::string("no worker is listening there, or it is stopped") +
                 (wants_curve(endpoint) ? ", or it does not know this client's CURVE key" : "")) +
      "; " + how_to_start(endpoint));
}

zmq::socket_t open_dealer(zmq::context_t& ctx, const std::string& endpoint,
                          const std::string& routing_id, const std::string& server_key) {
  if (const std::string path = protocol::ipc_path(endpoint); !path.empty()) {
    const std::string dir = protocol::socket_dir(path);
    struct stat st {};
    const bool dir_exists = ::lstat(dir.c_str(), &st) == 0;
    if (dir_exists) protocol::check_safe_dir(dir);
    if (!dir_exists || !protocol::check_own_socket(path)) {
      throw NoWorkerError("no worker at " + endpoint + ": there is no socket " + path + "; " +
                          how_to_start(endpoint));
    }
  } else if (endpoint.rfind("tcp://", 0) != 0) {
    throw std::invalid_argument("endpoint must be ipc://PATH or tcp://HOST:PORT: " + endpoint);
  }
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 0);
  sock.set(zmq::sockopt::routing_id, routing_id);
  if (wants_curve(endpoint)) set_curve(sock, endpoint, server_key);
  const std::string monitor_ep = "inproc://rwkvd-handshake-" + protocol::random_hex(8);
  if (zmq_socket_monitor(sock.handle(), monitor_ep.c_str(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0) {
    throw zmq::error_t();
  }
  sock.connect(endpoint);
  probe(ctx, sock, monitor_ep, endpoint);
  return sock;
}

}  // namespace rwkvd::client
