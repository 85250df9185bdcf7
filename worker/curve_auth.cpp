#include "worker/curve_auth.h"

#include <spdlog/spdlog.h>

#include <array>
#include <stdexcept>
#include <vector>
#include <zmq_addon.hpp>

namespace rwkvd::worker {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by RFC 27
constexpr const char* kDomain = "rwkvd";

std::string z85_to_raw(const std::string& z85) {
  std::array<uint8_t, 32> raw{};
  if (zmq_z85_decode(raw.data(), z85.c_str()) == nullptr) {
    throw std::runtime_error("not a Z85 key: " + z85);
  }
  return {reinterpret_cast<const char*>(raw.data()), raw.size()};
}

}  // namespace

protocol::CurveKeyPair make_curve_pair() {
  std::array<char, 41> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    throw std::runtime_error("ZeroMQ cannot make CURVE keys (built without libsodium?)");
  }
  return {pub.data(), sec.data()};
}

CurveAuth::CurveAuth(zmq::context_t& ctx) {
  if (zmq_has("curve") == 0) throw std::runtime_error("this ZeroMQ has no CURVE security");
  const std::string dir = protocol::open_curve_key_dir();
  server_ = protocol::store_curve_pair(dir, "server", make_curve_pair());
  allowed_.insert(
      z85_to_raw(protocol::store_curve_pair(dir, "client", make_curve_pair()).public_key));
  for (const std::string& key : protocol::read_authorized_keys(dir))
    allowed_.insert(z85_to_raw(key));
  zap_ = zmq::socket_t(ctx, zmq::socket_type::rep);
  zap_.set(zmq::sockopt::linger, 0);
  zap_.bind(kZapEndpoint);
  thread_ = std::thread([this] { run(); });
}

CurveAuth::~CurveAuth() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void CurveAuth::apply(zmq::socket_t& server) const {
  server.set(zmq::sockopt::curve_server, 1);
  server.set(zmq::sockopt::curve_secretkey, server_.secret_key);
  server.set(zmq::sockopt::zap_domain, kDomain);
}

void CurveAuth::run() {
  while (!stop_) {
    zmq::pollitem_t item{zap_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      if ((item.revents & ZMQ_POLLIN) != 0 && !handle_one()) break;
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      spdlog::error("CURVE authentication: {}", e.what());
    }
  }
  zap_.close();
}

// One ZAP request: version, request id, domain, address, routing id, mechanism, credentials.
// Answers 200 for a known client key over CURVE, 400 for anything else.
bool CurveAuth::handle_one() {
  std::vector<zmq::message_t> req;
  if (!zmq::recv_multipart(zap_, std::back_inserter(req))) return false;
  const bool ok = req.size() >= 7 && req[0].to_string_view() == "1.0" &&
                  req[5].to_string_view() == "CURVE" && allowed_.count(req[6].to_string()) > 0;
  if (!ok) {
    spdlog::warn("refused a connection from {}: its CURVE key is not one this worker knows",
                 req.size() > 3 ? req[3].to_string() : std::string("?"));
  }
  std::array<zmq::const_buffer, 6> reply{
      zmq::str_buffer("1.0"),
      zmq::buffer(req.size() > 1 ? req[1].to_string_view() : ""),
      ok ? zmq::str_buffer("200") : zmq::str_buffer("400"),
      ok ? zmq::str_buffer("OK") : zmq::str_buffer("unknown client key"),
      zmq::str_buffer(""),
      zmq::str_buffer("")};
  return zmq::send_multipart(zap_, reply).has_value();
}

}  // namespace rwkvd::worker
