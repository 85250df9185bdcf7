#include "worker/state_reader.h"

#include <chrono>
#include <exception>

namespace rwkvd::worker {

StateReader::StateReader(unsigned threads, std::function<void()> wake, Prepare prepare)
    : wake_(std::move(wake)), prepare_(std::move(prepare)) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i) threads_.emplace_back([this] { loop(); });
}

StateReader::~StateReader() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void StateReader::submit(std::string client, protocol::Request req) {
  {
    std::lock_guard lock(mu_);
    todo_.push_back(Done{std::move(client), std::move(req), std::nullopt, {}, 0});
  }
  work_cv_.notify_one();
}

std::vector<StateReader::Done> StateReader::take() {
  std::lock_guard lock(mu_);
  std::vector<Done> out;
  out.swap(done_);
  return out;
}

void StateReader::drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return todo_.empty() && running_ == 0; });
}

void StateReader::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    // Reads still queued at stop are done too: their clients get their replies.
    work_cv_.wait(lock, [this] { return stop_ || !todo_.empty(); });
    if (todo_.empty()) return;
    Done d = std::move(todo_.front());
    todo_.pop_front();
    ++running_;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      prepare_(d.req);
    } catch (const protocol::ProtocolError& e) {
      d.error = e.code();
      d.message = e.what();
    } catch (const std::exception& e) {  // std::bad_alloc: an error reply, not the end of us
      d.error = protocol::ErrorCode::kInternal;
      d.message = e.what();
    }
    d.read_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    done_.push_back(std::move(d));
    --running_;
    if (todo_.empty() && running_ == 0) idle_cv_.notify_all();
    lock.unlock();
    wake_();
    lock.lock();
  }
}

}  // namespace rwkvd::worker
