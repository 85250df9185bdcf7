#include "clients/http/client_pool.h"

#include "clients/http/api_error.h"

namespace rwkvd::http {

ClientPool::Loan::~Loan() {
  if (!c_) return;
  std::lock_guard lock(pool_.mu_);
  pool_.idle_.push_back(std::move(c_));
}

std::unique_ptr<client::Client> ClientPool::checkout() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  try {
    return std::make_unique<client::Client>(endpoint_, timeout_);
  } catch (const std::exception& e) {  // a client that connects at once may find no worker
    throw ApiError(503, "server_error",
                   "cannot reach the rwkvd worker at " + endpoint_ + ": " + e.what() +
                       " (is `rwkvd serve` running on that endpoint?)",
                   "", "worker_unavailable");
  }
}

}  // namespace rwkvd::http
