#include "worker/stats.h"

#include <algorithm>
#include <bit>

namespace rwkvd::worker {

using protocol::Value;

void Histogram::add(uint64_t n) {
  const size_t b = n <= 1 ? 0 : std::min<size_t>(std::bit_width(n - 1), buckets_.size() - 1);
  buckets_[b] += 1;
  count_ += 1;
  sum_ += n;
  max_ = std::max(max_, n);
}

Value Histogram::to_value() const {
  Value::Map buckets;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i] != 0)
      buckets.emplace_back(std::to_string(uint64_t{1} << i), Value(buckets_[i]));
  }
  return Value(Value::Map{
      {"count", Value(count_)},
      {"mean", Value(count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0)},
      {"max", Value(max_)},
      {"le", Value(std::move(buckets))}});
}

void LatencyWindow::add(double ms) {
  if (ring_.size() < 1024) {
    ring_.push_back(ms);
  } else {
    ring_[next_] = ms;
    next_ = (next_ + 1) % ring_.size();
  }
  count_ += 1;
  sum_ += ms;
  max_ = std::max(max_, ms);
}

Value LatencyWindow::to_value() const {
  std::vector<double> v = ring_;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    return v.empty()
               ? 0.0
               : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  };
  return Value(Value::Map{{"count", Value(count_)},
                          {"mean", Value(count_ ? sum_ / static_cast<double>(count_) : 0.0)},
                          {"p50", Value(pct(0.5))},
                          {"p99", Value(pct(0.99))},
                          {"max", Value(max_)}});
}

void Stats::count_request(protocol::Op op) {
  std::lock_guard lock(mu_);
  requests_[protocol::op_name(op)] += 1;
}

void Stats::count_error(protocol::ErrorCode code) {
  std::lock_guard lock(mu_);
  errors_[protocol::error_name(code)] += 1;
}

void Stats::record_latency(protocol::Op op, double ms) {
  std::lock_guard lock(mu_);
  latency_[protocol::op_name(op)].add(ms);
}

void Stats::record_latency(const std::string& what, double ms) {
  std::lock_guard lock(mu_);
  latency_[what].add(ms);
}

void Stats::record_engine_call(const char* what, double ms) {
  std::lock_guard lock(mu_);
  EngineCalls& e = engine_[what];
  e.calls += 1;
  e.total_ms += ms;
  e.max_ms = std::max(e.max_ms, ms);
}

void Stats::record_embed_dispatch(uint64_t sequences, uint64_t requests, uint64_t tokens) {
  std::lock_guard lock(mu_);
  embed_sequences_.add(sequences);
  embed_requests_.add(requests);
  embed_tokens_ += tokens;
}

void Stats::record_generation_step(uint64_t sequences, uint64_t tokens) {
  std::lock_guard lock(mu_);
  gen_sequences_.add(sequences);
  gen_tokens_in_ += tokens;
}

void Stats::count_preemptions(uint64_t n) {
  std::lock_guard lock(mu_);
  preemptions_ += n;
}

void Stats::add_generated_tokens(uint64_t n) {
  std::lock_guard lock(mu_);
  gen_tokens_out_ += n;
}

void Stats::prefix_lookup(bool hit) {
  std::lock_guard lock(mu_);
  (hit ? prefix_hits_ : prefix_misses_) += 1;
}

void Stats::set_prefix_cache(uint64_t entries, uint64_t bytes, uint64_t budget) {
  std::lock_guard lock(mu_);
  prefix_entries_ = entries;
  prefix_bytes_ = bytes;
  prefix_budget_ = budget;
}

void Stats::shm_event(const char* what) {
  std::lock_guard lock(mu_);
  shm_[what] += 1;
}

void Stats::client_event(const char* what) {
  std::lock_guard lock(mu_);
  clients_[what] += 1;
}

void Stats::set_engine_gauges(uint64_t queued, uint64_t active, uint64_t sessions,
                              uint64_t slots_used) {
  std::lock_guard lock(mu_);
  queued_ = queued;
  active_ = active;
  sessions_ = sessions;
  slots_used_ = slots_used;
}

uint64_t Stats::embed_dispatches() const {
  std::lock_guard lock(mu_);
  return embed_sequences_.count();
}

Value Stats::to_value(Value::Map extra) const {
  std::lock_guard lock(mu_);
  auto counts = [](const std::map<std::string, uint64_t>& m) {
    Value::Map out;
    for (const auto& [k, v] : m) out.emplace_back(k, Value(v));
    return Value(std::move(out));
  };
  Value::Map lat;
  for (const auto& [k, w] : latency_) lat.emplace_back(k, w.to_value());
  Value::Map engine;
  for (const auto& [k, e] : engine_) {
    engine.emplace_back(k, Value(Value::Map{{"calls", Value(e.calls)},
                                            {"total_ms", Value(e.total_ms)},
                                            {"max_ms", Value(e.max_ms)}}));
  }
  const uint64_t lookups = prefix_hits_ + prefix_misses_;
  Value::Map shm{{"events", counts(shm_)}};
  for (auto& kv : extra) shm.push_back(std::move(kv));
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return Value(
      Value::Map{{"uptime_s", Value(uptime)},
                 {"requests", counts(requests_)},
                 {"errors", counts(errors_)},
                 {"queue_depth", Value(queued_)},
                 {"active_sequences", Value(active_)},
                 {"sessions", Value(sessions_)},
                 {"slots_used", Value(slots_used_)},
                 {"embed", Value(Value::Map{{"dispatches", Value(embed_sequences_.count())},
                                            {"sequences", Value(embed_sequences_.sum())},
                                            {"tokens", Value(embed_tokens_)},
                                            {"batch_sequences", embed_sequences_.to_value()},
                                            {"batch_requests", embed_requests_.to_value()}})},
                 {"generate", Value(Value::Map{{"steps", Value(gen_sequences_.count())},
                                               {"prompt_and_decode_tokens", Value(gen_tokens_in_)},
                                               {"generated_tokens", Value(gen_tokens_out_)},
                                               {"preemptions", Value(preemptions_)},
                                               {"batch_sequences", gen_sequences_.to_value()}})},
                 {"latency_ms", Value(std::move(lat))},
                 {"engine_ms", Value(std::move(engine))},
                 {"prefix_cache",
                  Value(Value::Map{{"hits", Value(prefix_hits_)},
                                   {"misses", Value(prefix_misses_)},
                                   {"hit_rate", Value(lookups ? static_cast<double>(prefix_hits_) /
                                                                    static_cast<double>(lookups)
                                                              : 0.0)},
                                   {"entries", Value(prefix_entries_)},
                                   {"bytes", Value(prefix_bytes_)},
                                   {"budget_bytes", Value(prefix_budget_)}})},
                 {"shm", Value(std::move(shm))},
                 {"clients", counts(clients_)}});
}

}  // namespace rwkvd::worker
