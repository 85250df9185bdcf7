#pragma once
// One process's Vulkan device and its pipelines, kept across the models opened on it (as ggml
// keeps its backend's device): a model opened on a context that exists skips the instance, the
// device and the pipeline cache's read, and makes only the pipelines that earlier models on it
// did not. Backends on one context may run at the same time (the device serialises its queues).
#include <memory>

#include "engine/vk/device.h"
#include "engine/vk/pipelines.h"

namespace rwkvd::engine {

class VkContext {
 public:
  // Makes the device (its tuning changed by `patch`), then reads the pipeline cache.
  explicit VkContext(const vk::TuningPatch& patch = {});
  VkContext(const VkContext&) = delete;
  VkContext& operator=(const VkContext&) = delete;

  vk::Device& device() { return *dev_; }
  vk::Pipelines& pipelines() { return *pipes_; }
  double device_seconds() const { return device_s_; }
  double pipeline_cache_seconds() const { return pipeline_cache_s_; }

 private:
  // Declaration order is destruction order reversed: the device outlives the pipelines.
  std::unique_ptr<vk::Device> dev_;
  std::unique_ptr<vk::Pipelines> pipes_;
  double device_s_ = 0, pipeline_cache_s_ = 0;
};

}  // namespace rwkvd::engine
