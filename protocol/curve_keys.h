#pragma once
// The user's CURVE keys (ZeroMQ's CurveZMQ: the worker proves it holds the server key, a client
// the key of a pair the worker knows). They live in one private directory per user,
// $XDG_CONFIG_HOME/rwkvd or ~/.config/rwkvd (mode 0700, created on first use):
//   server.key       the worker's pair: public key, then secret key (Z85, one per line)
//   client.key       this user's client pair, same format
//   authorized_keys  optional: further client public keys the worker accepts, one per line
// Files are written 0600 and only ever created, never changed: the first process to store a
// pair wins (link(2)), so racing processes agree. File handling only; keys are made by the
// callers (zmq_curve_keypair).
#include <optional>
#include <string>
#include <vector>

namespace rwkvd::protocol {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;
};

// The key directory's path (not created).
std::string curve_key_dir();
// The directory, created 0700 when missing; refused unless private (owned_path.h).
std::string open_curve_key_dir();
// <dir>/<name>.key, or nullopt when it does not exist. Throws std::runtime_error when the file
// is not a regular file of this user readable by nobody else, or malformed.
std::optional<CurveKeyPair> read_curve_pair(const std::string& dir, const std::string& name);
// Stores `fresh` as <dir>/<name>.key unless a pair is there already; returns the stored pair.
CurveKeyPair store_curve_pair(const std::string& dir, const std::string& name,
                              const CurveKeyPair& fresh);
// The keys in <dir>/authorized_keys (blank lines and '#' comments skipped); none if absent.
std::vector<std::string> read_authorized_keys(const std::string& dir);
// True for a Z85 key of 40 characters.
bool is_z85_key(const std::string& key);

}  // namespace rwkvd::protocol
