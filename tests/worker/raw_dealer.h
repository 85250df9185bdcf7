#pragma once
// A raw DEALER for tests that need what the client library hides: requests pipelined without
// waiting, replies left unread, heartbeats seen. Encodes requests and decodes replies with the
// protocol's codec.
#include <zmq.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "protocol/codec.h"
#include "protocol/messages.h"

namespace rwkvd::test {

class RawDealer {
 public:
  // rcvhwm / rcvbuf: 0 keeps ZeroMQ's defaults.
  explicit RawDealer(const std::string& endpoint, int rcvhwm = 0, int rcvbuf = 0)
      : s_(ctx_, zmq::socket_type::dealer) {
    s_.set(zmq::sockopt::linger, 0);
    if (rcvhwm > 0) s_.set(zmq::sockopt::rcvhwm, rcvhwm);
    if (rcvbuf > 0) s_.set(zmq::sockopt::rcvbuf, rcvbuf);
    s_.connect(endpoint);
  }
  void send(const protocol::Request& r) {
    const std::string bytes = protocol::encode_request(r);
    s_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  // The next reply within 30 s, heartbeats (id 0) included unless skip_heartbeats.
  std::optional<protocol::Reply> next(bool skip_heartbeats = false) {
    for (;;) {
      zmq::pollitem_t item{s_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::seconds(30));
      if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
      zmq::message_t m;
      (void)s_.recv(m);
      auto rep = protocol::decode_reply(m.to_string_view());
      if (!skip_heartbeats || rep.id != 0) return rep;
    }
  }
  // Whether a reply is waiting now (nothing read).
  bool has_reply() {
    zmq::pollitem_t item{s_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(0));
    return (item.revents & ZMQ_POLLIN) != 0;
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t s_;
};

}  // namespace rwkvd::test
