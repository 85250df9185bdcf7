#include "tools/device.h"

#include <stdexcept>

#ifdef RWKVD_HAVE_VULKAN
#include "engine/vk/context.h"
#include "engine/vk/vk_backend.h"
#endif

namespace rwkvd::tools {
namespace {

void check_device(const std::string& device) {
  if (device != "cpu" && device != "gpu") {
    throw std::runtime_error("unknown device '" + device + "' (cpu or gpu)");
  }
#ifndef RWKVD_HAVE_VULKAN
  if (device == "gpu") {
    throw std::runtime_error("--device gpu: not implemented yet (this build has no Vulkan engine)");
  }
#endif
}

}  // namespace

std::shared_ptr<engine::VkContext> open_gpu_context(const std::string& device) {
  check_device(device);
#ifdef RWKVD_HAVE_VULKAN
  if (device == "gpu") return engine::make_vk_context();
#endif
  return nullptr;
}

DeviceChoice choose_device(const std::string& requested) {
  if (requested != "auto") {
    return {requested, open_gpu_context(requested), "--device " + requested};
  }
#ifdef RWKVD_HAVE_VULKAN
  try {
    auto gpu = engine::make_vk_context();
    const auto& props = gpu->device().props();
    const std::string name = props.deviceName;
    if (props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) {
      return {"gpu", std::move(gpu), "auto: the GPU " + name + " (--device cpu for the CPU)"};
    }
    return {"cpu", nullptr,
            "auto: no GPU, only " + name +
                ", a CPU implementation of Vulkan (--device gpu "
                "runs on it)"};
  } catch (const std::exception& e) {
    return {"cpu", nullptr, std::string("auto: no GPU (") + e.what() + ")"};
  }
#else
  return {"cpu", nullptr, "auto: this build has no GPU engine"};
#endif
}

std::unique_ptr<engine::Backend> open_backend(const std::string& model_path,
                                              const std::string& device,
                                              const engine::BackendOptions& options,
                                              std::shared_ptr<engine::VkContext> gpu) {
  check_device(device);
  auto model = engine::Rwkv7Model::load(model_path);
  if (device == "cpu") return engine::make_cpu_backend(std::move(model), options);
#ifdef RWKVD_HAVE_VULKAN
  return engine::make_vk_backend(std::move(model), options, std::move(gpu));
#else
  (void)gpu;
  return nullptr;  // check_device() threw
#endif
}

}  // namespace rwkvd::tools
