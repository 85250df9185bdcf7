#pragma once
// Where the worker listens. The default is a per-user ipc socket: $XDG_RUNTIME_DIR/rwkvd.sock,
// else /tmp/rwkvd-<uid>/rwkvd.sock, in a private directory of the user (protocol/owned_path.h);
// the socket itself is made 0600. TCP is for loopback unless --allow-remote, and uses CURVE
// (worker/curve_auth.h).
#include <sys/types.h>

#include <string>

namespace rwkvd::worker {

std::string default_endpoint();
// Refuses a non-loopback tcp endpoint without allow_remote; for ipc creates/checks the
// directory (nobody else may be able to change it), refuses a socket another worker is
// listening on or that is not ours, and removes a stale one of ours.
// Throws std::runtime_error with a readable reason.
void prepare_endpoint(const std::string& endpoint, bool allow_remote);

// The socket file a bind created, known by its inode so that shutdown removes that file and
// nothing that may have taken its name since.
struct BoundSocket {
  std::string path;  // "" for tcp
  ino_t ino = 0;
  dev_t dev = 0;
};
// After bind: the ipc socket file's mode to 0600, and which file it is.
BoundSocket secure_endpoint(const std::string& endpoint);
// Unlinks the socket file if it is still the one secure_endpoint saw.
void remove_endpoint(const BoundSocket& socket);

}  // namespace rwkvd::worker
