#pragma once
// Reads the states requests name as shared-memory inputs on threads of its own, so that the
// server thread goes on decoding and answering while a 21.6 MB state (2.9B) is copied in: six
// clients opening sessions at once used to queue behind each other's reads, ~5 ms each (H100
// machine). The server has its large texts tokenized here too (`prepare`). The server keeps each
// client's order: it holds the client's later messages until the read is done (server.cpp).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/messages.h"

namespace rwkvd::worker {

class StateReader {
 public:
  struct Done {
    std::string client;
    protocol::Request req;  // its state read, where error is empty
    std::optional<protocol::ErrorCode> error;
    std::string message;
    double read_ms = 0;
  };

  // wake: called (from a reader thread) when a read has finished and take() has work.
  // prepare: what a reader thread does to a request (throwing ProtocolError for a bad one).
  using Prepare = std::function<void(protocol::Request&)>;
  StateReader(unsigned threads, std::function<void()> wake, Prepare prepare = read_shm_state);
  ~StateReader();  // finishes the reads it was given
  StateReader(const StateReader&) = delete;
  StateReader& operator=(const StateReader&) = delete;

  // Prepares req on a reader thread (by default: reads req.state_shm into req.state).
  void submit(std::string client, protocol::Request req);
  // The reads finished since the last call, in the order they finished.
  std::vector<Done> take();
  // Waits until every submitted read has finished.
  void drain();

 private:
  void loop();

  static void read_shm_state(protocol::Request& req) { protocol::read_shm_state(req); }
  std::function<void()> wake_;
  Prepare prepare_;
  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Done> todo_;
  std::vector<Done> done_;
  size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace rwkvd::worker
