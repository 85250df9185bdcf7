#pragma once
// Counters for the stats op: requests and errors per kind, latencies, batch-size histograms of
// embed dispatches and generation steps, prefix-cache and shared-memory use. Both threads
// record into it, so every method takes the lock; everything is cheap enough for that.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace rwkvd::worker {

// Batch sizes in power-of-two buckets: bucket i holds sizes in (2^(i-1), 2^i].
class Histogram {
 public:
  void add(uint64_t n);
  protocol::Value to_value() const;
  uint64_t count() const { return count_; }
  uint64_t sum() const { return sum_; }
  uint64_t max() const { return max_; }

 private:
  std::array<uint64_t, 16> buckets_{};
  uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

// The last 1024 latencies of one op, for percentiles.
class LatencyWindow {
 public:
  void add(double ms);
  protocol::Value to_value() const;

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
  uint64_t count_ = 0;
  double sum_ = 0, max_ = 0;
};

class Stats {
 public:
  Stats() : start_(std::chrono::steady_clock::now()) {}
  void count_request(protocol::Op op);
  void count_error(protocol::ErrorCode code);
  void record_latency(protocol::Op op, double ms);
  // A latency of something other than an op (e.g. "shm_state_read"), beside the ops'.
  void record_latency(const std::string& what, double ms);
  // One call of the engine (TimedBackend): "run", "write_state", ...
  void record_engine_call(const char* what, double ms);
  void record_embed_dispatch(uint64_t sequences, uint64_t requests, uint64_t tokens);
  void record_generation_step(uint64_t sequences, uint64_t tokens);
  void add_generated_tokens(uint64_t n);
  // Tasks that yielded their slots to other clients (fair scheduling, Scheduler::share_slots).
  void count_preemptions(uint64_t n);
  void prefix_lookup(bool hit);
  void set_prefix_cache(uint64_t entries, uint64_t bytes, uint64_t budget);
  // "allocations", "inline_fallbacks", "waits", "expired", "input_states" (shared-memory inputs)
  void shm_event(const char* what);
  // "gone" (vanished with work in flight), "stalled" (stopped reading: its queue filled).
  void client_event(const char* what);
  // Gauges the engine thread publishes once per loop.
  void set_engine_gauges(uint64_t queued, uint64_t active, uint64_t sessions, uint64_t slots_used);

  // `extra` (shm occupancy, from the server thread) is merged in.
  protocol::Value to_value(protocol::Value::Map extra) const;
  uint64_t embed_dispatches() const;

 private:
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, uint64_t> requests_, errors_, shm_, clients_;
  std::map<std::string, LatencyWindow> latency_;
  struct EngineCalls {
    uint64_t calls = 0;
    double total_ms = 0, max_ms = 0;
  };
  std::map<std::string, EngineCalls> engine_;
  Histogram embed_sequences_, embed_requests_, gen_sequences_;
  uint64_t embed_tokens_ = 0, gen_tokens_in_ = 0, gen_tokens_out_ = 0, preemptions_ = 0;
  uint64_t prefix_hits_ = 0, prefix_misses_ = 0, prefix_entries_ = 0, prefix_bytes_ = 0,
           prefix_budget_ = 0;
  uint64_t queued_ = 0, active_ = 0, sessions_ = 0, slots_used_ = 0;
};

}  // namespace rwkvd::worker
