#include "engine/cpu/thread_pool.h"

#include <algorithm>

namespace rwkvd::engine::cpu {
namespace {
std::pair<size_t, size_t> share(size_t n, unsigned parts, unsigned index) {
  const size_t per = n / parts, extra = n % parts;
  const size_t begin = index * per + std::min<size_t>(index, extra);
  return {begin, begin + per + (index < extra ? 1 : 0)};
}
}  // namespace

ThreadPool::ThreadPool(unsigned n_threads) {
  if (n_threads == 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t, unsigned)>& fn) {
  if (n == 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  auto [b, e] = share(n, size(), 0);
  if (b < e) fn(b, e, 0);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t, unsigned)>* job;
    size_t n;
    {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
    }
    auto [b, e] = share(n, size(), index);
    if (b < e) (*job)(b, e, index);
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace rwkvd::engine::cpu
