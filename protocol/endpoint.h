#pragma once
// The default endpoint, shared by the worker and the clients: $RWKVD_ENDPOINT if set (clients
// only), else $XDG_RUNTIME_DIR/rwkvd.sock when that directory exists, else
// /tmp/rwkvd-<uid>/rwkvd.sock. Either directory must be a private one of the user
// (owned_path.h): the worker refuses to listen there, and clients to connect, otherwise.
#include <string>

namespace rwkvd::protocol {

std::string default_endpoint(bool honour_env = true);
// The filesystem path of an ipc endpoint ("" for others).
std::string ipc_path(const std::string& endpoint);
// The directory an ipc socket path lives in ("." for a bare name).
std::string socket_dir(const std::string& path);
// True when `dir` is the directory of one of the default endpoints (XDG or /tmp/rwkvd-<uid>).
bool is_default_dir(const std::string& dir);

}  // namespace rwkvd::protocol
