#pragma once
// A fixed pool of worker threads for the CPU backend's data-parallel loops.
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rwkvd::engine::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned n_threads);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n); the calling thread
  // takes part. Returns when all ranges are done.
  void parallel_for(size_t n, const std::function<void(size_t, size_t, unsigned)>& fn);

 private:
  void worker_loop(unsigned index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(size_t, size_t, unsigned)>* job_ = nullptr;
  size_t job_n_ = 0;
  uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stop_ = false;
};

}  // namespace rwkvd::engine::cpu
