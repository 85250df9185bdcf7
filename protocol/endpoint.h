#pragma once
// The default endpoint, shared by the worker and the clients: $RWKVD_ENDPOINT if set (clients
// only), else $XDG_RUNTIME_DIR/rwkvd.sock when that directory is ours, else
// /tmp/rwkvd-<uid>/rwkvd.sock.
#include <string>

namespace rwkvd::protocol {

std::string default_endpoint(bool honour_env = true);

}  // namespace rwkvd::protocol
