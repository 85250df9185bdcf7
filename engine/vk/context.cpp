#include "engine/vk/context.h"

#include <chrono>

namespace rwkvd::engine {

VkContext::VkContext(const vk::TuningPatch& patch) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  dev_ = std::make_unique<vk::Device>(patch);
  const auto t1 = Clock::now();
  pipes_ = std::make_unique<vk::Pipelines>(*dev_);
  device_s_ = std::chrono::duration<double>(t1 - t0).count();
  pipeline_cache_s_ = std::chrono::duration<double>(Clock::now() - t1).count();
}

}  // namespace rwkvd::engine
