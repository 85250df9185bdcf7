#include "worker/endpoint.h"

#include "protocol/endpoint.h"
#include "protocol/owned_path.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace rwkvd::worker {
namespace {

// Only literal loopback addresses (and the name localhost): a prefix test would pass
// "127.0.0.1.example.com", and ZeroMQ would take "lo" or "*" as interfaces to bind.
bool is_loopback_host(std::string host) {
  if (host == "localhost") return true;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// True when something accepts connections on the unix socket at `path`.
bool socket_is_live(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

}  // namespace

std::string default_endpoint() {
  // The worker ignores $RWKVD_ENDPOINT (that tells clients where to go); --endpoint sets it.
  return protocol::default_endpoint(false);
}

void prepare_endpoint(const std::string& endpoint, bool allow_remote) {
  if (endpoint.rfind("tcp://", 0) == 0) {
    const std::string hostport = endpoint.substr(6);
    const auto colon = hostport.rfind(':');
    if (colon == std::string::npos)
      throw std::runtime_error("tcp endpoint needs a port: " + endpoint);
    const std::string host = hostport.substr(0, colon);
    if (!is_loopback_host(host) && !allow_remote) {
      throw std::runtime_error("refusing to listen on non-loopback " + endpoint +
                               ": pass --allow-remote to open it to other hosts (clients still "
                               "need a CURVE key the worker knows, docs/THREAT_MODEL.md)");
    }
    return;
  }
  const std::string path = protocol::ipc_path(endpoint);
  if (path.empty()) throw std::runtime_error("endpoint must be ipc://PATH or tcp://HOST:PORT");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::runtime_error("ipc path too long for a unix socket: " + path);
  }
  const std::string dir = protocol::socket_dir(path);
  if (protocol::is_default_dir(dir)) {
    protocol::make_private_dir(dir);  // ours and 0700, or refused
  } else {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create " + dir + ": " + std::strerror(errno));
    }
    protocol::check_safe_dir(dir);
  }
  if (protocol::check_own_socket(path)) {
    if (socket_is_live(path)) {
      throw std::runtime_error("another worker is already listening on " + endpoint);
    }
    ::unlink(path.c_str());  // ours, left behind by a worker that died
  }
}

BoundSocket secure_endpoint(const std::string& endpoint) {
  BoundSocket b;
  b.path = protocol::ipc_path(endpoint);
  if (b.path.empty()) return b;
  ::chmod(b.path.c_str(), 0600);
  if (!protocol::check_own_socket(b.path, &b.ino, &b.dev)) {
    throw std::runtime_error("the socket " + b.path + " vanished after bind");
  }
  return b;
}

void remove_endpoint(const BoundSocket& socket) {
  if (socket.path.empty()) return;
  struct stat st {};
  if (::lstat(socket.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == socket.ino &&
      st.st_dev == socket.dev && st.st_uid == ::getuid()) {
    ::unlink(socket.path.c_str());
  }
}

}  // namespace rwkvd::worker
