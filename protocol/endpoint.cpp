#include "protocol/endpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace rwkvd::protocol {

std::string default_endpoint(bool honour_env) {
  if (const char* env = std::getenv("RWKVD_ENDPOINT"); honour_env && env != nullptr && *env) {
    return env;
  }
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    struct stat st {};
    if (::stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid()) {
      return std::string("ipc://") + xdg + "/rwkvd.sock";
    }
  }
  return "ipc:///tmp/rwkvd-" + std::to_string(::getuid()) + "/rwkvd.sock";
}

}  // namespace rwkvd::protocol
