#pragma once
// Everything `rwkvd http` can be told, with its defaults.
#include <chrono>
#include <cstdint>
#include <string>

namespace rwkvd::http {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;            // 0: any free port (the ready line says which)
  bool allow_remote = false;  // listen on a non-loopback address
  std::string api_key;        // "": no authentication; else `Authorization: Bearer <key>`
  std::string endpoint;       // the worker's; "": the default endpoint
  // Per worker reply: a whole non-streamed generation is one reply, so this bounds its length;
  // a dead worker is noticed sooner, by its missing heartbeats (PROTOCOL.md).
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};
  uint64_t max_body_bytes = 64u << 20;  // larger request bodies: 413
  unsigned threads = 16;                // requests served at once
};

}  // namespace rwkvd::http
