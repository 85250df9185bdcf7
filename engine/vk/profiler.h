#pragma once
// GPU time per kernel, from timestamp queries written after every dispatch of the recorded
// command buffers. Off unless $RWKVD_VK_PROFILE is set (1: print the table to stderr when the
// backend closes; any other value: append it to that file). Each recorded command buffer owns a
// range of queries that it resets itself, so replaying it needs no host work; after the fence,
// collect() adds the deltas to per-(label, tokens) totals. A delta includes the barrier wait and
// launch gap before the dispatch, which is what a forward really pays for it.
// RWKVD_VK_PROFILE=host:<1 or file> records only the host's phases of each forward (prepare and
// submit, the wait for the GPU, the output copy), without timestamps that would slow the GPU.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/vk/device.h"

namespace rwkvd::engine::vk {

class Profiler {
 public:
  explicit Profiler(Device& dev);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  bool enabled() const { return enabled_; }  // GPU timestamps
  bool records_host() const { return enabled_ || host_only_; }

  // A recording: call begin() at the start of a command buffer, stamp() after each dispatch.
  // Returns the recording's id (pass it to collect()). No-ops when disabled.
  uint32_t begin(VkCommandBuffer cb, uint32_t tokens);
  void stamp(VkCommandBuffer cb, uint32_t recording, const std::string& label);
  // Reads the results of recordings whose command buffers completed.
  void collect(const std::vector<uint32_t>& recordings);
  // Host time of one forward's phase (prepare, GPU wait, output copy), reported beside the GPU's.
  void host(uint32_t tokens, const std::string& label, double us);
  // Drops recordings whose command buffers were freed.
  void forget(const std::vector<uint32_t>& recordings);

  // Per tokens-per-forward: label, calls, total and mean µs, share of that forward's time.
  std::string report() const;

 private:
  struct Recording {
    uint32_t first = 0, used = 0, tokens = 0;
    std::vector<std::string> labels;  // labels[i] = what ran between query i and i + 1
  };
  struct Total {
    uint64_t calls = 0;
    double us = 0;
  };
  uint32_t allocate(uint32_t n);

  Device& dev_;
  bool enabled_ = false, host_only_ = false;
  std::string sink_;
  double ns_per_tick_ = 1;
  uint64_t valid_mask_ = ~uint64_t{0};
  VkQueryPool pool_ = VK_NULL_HANDLE;
  uint32_t capacity_ = 0, next_ = 0;
  std::vector<Recording> recordings_;
  std::map<std::pair<uint32_t, std::string>, Total> totals_;  // (tokens, label)
  std::map<std::pair<uint32_t, std::string>, Total> host_;    // (tokens, label)
  std::map<uint32_t, uint64_t> forwards_;                     // tokens -> forwards collected
};

}  // namespace rwkvd::engine::vk
