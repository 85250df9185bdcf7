#include "protocol/endpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace rwkvd::protocol {
namespace {

constexpr const char* kSocketName = "/rwkvd.sock";

std::string tmp_dir() {
  return "/tmp/rwkvd-" + std::to_string(::getuid());
}

// $XDG_RUNTIME_DIR where it names something that exists (else "": a stale value after su).
std::string xdg_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  struct stat st {};
  if (xdg == nullptr || *xdg == '\0' || ::lstat(xdg, &st) != 0) return "";
  return xdg;
}

}  // namespace

std::string default_endpoint(bool honour_env) {
  if (const char* env = std::getenv("RWKVD_ENDPOINT"); honour_env && env != nullptr && *env) {
    return env;
  }
  const std::string xdg = xdg_dir();
  return "ipc://" + (xdg.empty() ? tmp_dir() : xdg) + kSocketName;
}

std::string ipc_path(const std::string& endpoint) {
  return endpoint.rfind("ipc://", 0) == 0 ? endpoint.substr(6) : std::string();
}

std::string socket_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

bool is_default_dir(const std::string& dir) {
  const auto norm = [](const std::string& p) {
    return std::filesystem::path(p).lexically_normal().string();
  };
  const std::string xdg = xdg_dir();
  return norm(dir) == norm(tmp_dir()) || (!xdg.empty() && norm(dir) == norm(xdg));
}

}  // namespace rwkvd::protocol
