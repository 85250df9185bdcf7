#pragma once
// A Backend that forwards to a real one and fails on demand: the test-only fault injection hook
// for "the backend ran out of memory" (and for "the engine is slow", and "the engine is busy
// until the test lets go"). Armed counts are atomics because the worker's engine thread calls in
// while the test thread arms.
#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <thread>

#include "engine/backend.h"

namespace rwkvd::test {

class FaultyBackend : public engine::Backend {
 public:
  explicit FaultyBackend(std::unique_ptr<engine::Backend> inner) : inner_(std::move(inner)) {}

  // The next n calls of run() / of the state copies throw std::bad_alloc.
  std::atomic<int> fail_runs{0};
  std::atomic<int> fail_state_io{0};
  // Every run() first sleeps this long: a slow engine behind a live worker.
  std::atomic<int> run_delay_ms{0};
  // While hold_runs is set, run() waits (and says so in holding) before it runs: the engine
  // thread held mid-request, so that requests sent meanwhile queue up and meet the scheduler
  // together when the test lets go. No timing involved.
  std::atomic<bool> hold_runs{false};
  std::atomic<bool> holding{false};
  // While set, run() answers what a model with NaN weights gives: NaN rows, argmax -1.
  std::atomic<bool> nan_outputs{false};

  const engine::Rwkv7Hparams& hparams() const override { return inner_->hparams(); }
  std::string device_name() const override { return "faulty " + inner_->device_name(); }
  std::vector<std::string> device_features() const override { return inner_->device_features(); }
  uint32_t n_slots() const override { return inner_->n_slots(); }
  engine::LoadStats load_stats() const override { return inner_->load_stats(); }
  std::vector<engine::Tensor> run(std::span<const engine::SequenceInput> batch) override {
    maybe_fail(fail_runs);
    if (hold_runs.load()) {
      holding = true;
      while (hold_runs.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      holding = false;
    }
    if (const int ms = run_delay_ms.load(); ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    std::vector<engine::Tensor> out = inner_->run(batch);
    if (nan_outputs.load()) {
      for (size_t i = 0; i < out.size(); ++i) {
        const bool argmax = batch[i].output == engine::OutputMode::kLastArgmax;
        std::ranges::fill(out[i].data, argmax ? -1.0f : std::nanf(""));
      }
    }
    return out;
  }
  void reset_state(uint32_t slot) override { inner_->reset_state(slot); }
  void read_state(uint32_t slot, std::span<float> out) override {
    maybe_fail(fail_state_io);
    inner_->read_state(slot, out);
  }
  void write_state(uint32_t slot, std::span<const float> in) override {
    maybe_fail(fail_state_io);
    inner_->write_state(slot, in);
  }
  void copy_state(uint32_t src, uint32_t dst) override { inner_->copy_state(src, dst); }

 private:
  static void maybe_fail(std::atomic<int>& n) {
    int left = n.load();
    while (left > 0 && !n.compare_exchange_weak(left, left - 1)) {
    }
    if (left > 0) throw std::bad_alloc();
  }
  std::unique_ptr<engine::Backend> inner_;
};

}  // namespace rwkvd::test
