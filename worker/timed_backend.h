#pragma once
// The engine as the scheduler sees it, with the time of each call added to the worker's stats
// ("engine_ms" of the stats op): how much of the engine thread went to forwards and how much to
// moving states in and out of slots (a 2.9B state is 21.6 MB), which op latencies alone do not
// tell apart.
#include <chrono>

#include "engine/backend.h"
#include "worker/stats.h"

namespace rwkvd::worker {

class TimedBackend final : public engine::Backend {
  // (Defined before the calls that use it: its return type is deduced.)
  // Calls that throw are timed too: their time was spent all the same.
  template <typename F>
  auto timed(const char* what, F&& f) {
    struct Record {
      Stats& stats;
      const char* what;
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
      ~Record() {
        stats.record_engine_call(
            what, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
      }
    } record{stats_, what};
    return f();
  }

 public:
  TimedBackend(engine::Backend& inner, Stats& stats) : inner_(inner), stats_(stats) {}

  const engine::Rwkv7Hparams& hparams() const override { return inner_.hparams(); }
  std::string device_name() const override { return inner_.device_name(); }
  std::vector<std::string> device_features() const override { return inner_.device_features(); }
  uint32_t n_slots() const override { return inner_.n_slots(); }
  engine::LoadStats load_stats() const override { return inner_.load_stats(); }

  std::vector<engine::Tensor> run(std::span<const engine::SequenceInput> batch) override {
    return timed("run", [&] { return inner_.run(batch); });
  }
  void reset_state(uint32_t slot) override {
    timed("reset_state", [&] { inner_.reset_state(slot); });
  }
  void read_state(uint32_t slot, std::span<float> out) override {
    timed("read_state", [&] { inner_.read_state(slot, out); });
  }
  void write_state(uint32_t slot, std::span<const float> in) override {
    timed("write_state", [&] { inner_.write_state(slot, in); });
  }
  void copy_state(uint32_t src, uint32_t dst) override {
    timed("copy_state", [&] { inner_.copy_state(src, dst); });
  }

 private:
  engine::Backend& inner_;
  Stats& stats_;
};

}  // namespace rwkvd::worker
