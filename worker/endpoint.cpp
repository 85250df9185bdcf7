#include "worker/endpoint.h"

#include "protocol/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

std::string ipc_path(const std::string& endpoint) {
  return endpoint.rfind("ipc://", 0) == 0 ? endpoint.substr(6) : std::string();
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
                               ": the protocol has no authentication; pass --allow-remote to "
                               "do it anyway");
    }
    return;
  }
  const std::string path = ipc_path(endpoint);
  if (path.empty()) throw std::runtime_error("endpoint must be ipc://PATH or tcp://HOST:PORT");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::runtime_error("ipc path too long for a unix socket: " + path);
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (::mkdir(dir.c_str(), 0700) != 0) {
      throw std::runtime_error("cannot create " + dir.string() + ": " + std::strerror(errno));
    }
  } else if (dir == std::filesystem::path(ipc_path(default_endpoint())).parent_path() &&
             (st.st_uid != ::getuid() || (st.st_mode & 0077) != 0)) {
    // Our own per-user directory must be ours and private, or someone could swap the socket.
    throw std::runtime_error(dir.string() + " must be owned by this user with mode 0700");
  }
  if (std::filesystem::exists(path)) {
    if (socket_is_live(path)) {
      throw std::runtime_error("another worker is already listening on " + endpoint);
    }
    std::filesystem::remove(path);  // left behind by a worker that died
  }
}

void secure_endpoint(const std::string& endpoint) {
  const std::string path = ipc_path(endpoint);
  if (!path.empty()) ::chmod(path.c_str(), 0600);
}

}  // namespace rwkvd::worker
