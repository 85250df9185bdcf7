#pragma once
// Clients of the worker for the front's request threads. A client::Client is one connection
// for one thread at a time; a request takes one from the pool for its duration and gives it
// back, so idle connections are reused and the worker sees as many clients as there are
// requests in flight at once.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clients/cpp/client.h"

namespace rwkvd::http {

class ClientPool {
 public:
  ClientPool(std::string endpoint, std::chrono::milliseconds timeout)
      : endpoint_(std::move(endpoint)), timeout_(timeout) {}

  // A client on loan. drop() (e.g. after its HTTP client went away mid-stream) destroys it
  // instead of returning it: the worker then finds its peer gone and drops the work it still
  // runs for it (PROTOCOL.md, --client-queue and vanished clients).
  class Loan {
   public:
    explicit Loan(ClientPool& pool) : pool_(pool), c_(pool.checkout()) {}
    Loan(const Loan&) = delete;
    Loan& operator=(const Loan&) = delete;
    ~Loan();
    client::Client* operator->() { return c_.get(); }
    client::Client& operator*() { return *c_; }
    void drop() { c_.reset(); }

   private:
    ClientPool& pool_;
    std::unique_ptr<client::Client> c_;
  };

  Loan take() { return Loan(*this); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  // An idle client, or a new one; ApiError 503 (worker_unavailable) where none can be made.
  std::unique_ptr<client::Client> checkout();
  std::string endpoint_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<client::Client>> idle_;
};

}  // namespace rwkvd::http
