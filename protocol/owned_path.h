#pragma once
// Who may change the path of an ipc endpoint. A unix socket is only as private as the
// directories above it: another user who can write any of them can put a socket of theirs in
// the worker's place (reading prompts, forging replies) or repoint a symbolic link while the
// worker runs. The worker and every client check the same rules here before they bind or
// connect, with lstat so that a link is judged as a link. No ZeroMQ: plain POSIX.
#include <sys/types.h>
#include <stdexcept>
#include <string>

namespace rwkvd::protocol {

// An endpoint path another user could change, or that is not what it should be.
class UnsafePathError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every directory on the way to `dir` (as written and as resolved), `dir` included, is owned by
// root or this user and writable by nobody else unless sticky (like /tmp); a symbolic link on
// the way is owned by root or this user. Throws UnsafePathError naming the culprit.
void check_safe_dir(const std::string& dir);

// check_safe_dir, and `dir` itself is a real directory (not a link) of this user with no group
// or other permissions: the rule for the per-user default directories.
void check_private_dir(const std::string& dir);

// Creates `dir` with mode 0700 unless it exists, then check_private_dir (a directory someone
// else made first is refused, never used or changed).
void make_private_dir(const std::string& dir);

// The socket file of an ipc endpoint: false when there is none; true when it is a socket (not a
// link) owned by this user; else throws UnsafePathError. `ino`, when given, gets its inode.
bool check_own_socket(const std::string& path, ino_t* ino = nullptr, dev_t* dev = nullptr);

}  // namespace rwkvd::protocol
