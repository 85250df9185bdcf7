#include "clients/http/client_pool.h"

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
  return std::make_unique<client::Client>(endpoint_, timeout_);
}

}  // namespace rwkvd::http
