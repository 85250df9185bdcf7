#pragma once
// Opens a model on the backend a command asks for ("cpu" or "gpu").
#include <memory>
#include <string>

#include "engine/backend.h"

namespace rwkvd::engine {
class VkContext;  // engine/vk/context.h
}

namespace rwkvd::tools {

// The GPU device for open_backend() to keep across loads ("gpu" only; null for "cpu"). Throws
// when this build has no Vulkan engine or the machine no device.
std::shared_ptr<engine::VkContext> open_gpu_context(const std::string& device);

// What `--device auto` (or cpu, gpu) comes to: "gpu" with its context where this build has the
// Vulkan engine and the machine a GPU (a CPU implementation of Vulkan such as lavapipe is not
// one: the CPU backend is faster there), else "cpu"; `why` says so in words for the log.
struct DeviceChoice {
  std::string device;
  std::shared_ptr<engine::VkContext> gpu;
  std::string why;
};
DeviceChoice choose_device(const std::string& requested);

// `gpu`: a context from open_gpu_context(), or null for a device made by this load.
std::unique_ptr<engine::Backend> open_backend(const std::string& model_path,
                                              const std::string& device,
                                              const engine::BackendOptions& options,
                                              std::shared_ptr<engine::VkContext> gpu = nullptr);

}  // namespace rwkvd::tools
