#pragma once
// Where the worker listens. The default is a per-user ipc socket: $XDG_RUNTIME_DIR/rwkvd.sock,
// else /tmp/rwkvd-<uid>/rwkvd.sock in a directory of mode 0700; the socket itself is made 0600.
// TCP is for loopback unless --allow-remote: the protocol has no authentication.
#include <string>

namespace rwkvd::worker {

std::string default_endpoint();
// Refuses a non-loopback tcp endpoint without allow_remote; for ipc creates/checks the
// directory, refuses a socket another worker is listening on, and removes a stale one.
// Throws std::runtime_error with a readable reason.
void prepare_endpoint(const std::string& endpoint, bool allow_remote);
// After bind: the ipc socket file's mode to 0600 (no-op for tcp).
void secure_endpoint(const std::string& endpoint);
// The filesystem path of an ipc endpoint ("" for others).
std::string ipc_path(const std::string& endpoint);

}  // namespace rwkvd::worker
