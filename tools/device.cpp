#include "tools/device.h"

#include <stdexcept>

#ifdef RWKVD_HAVE_VULKAN
#include "engine/vk/vk_backend.h"
#endif

namespace rwkvd::tools {

std::unique_ptr<engine::Backend> open_backend(const std::string& model_path,
                                              const std::string& device,
                                              const engine::BackendOptions& options) {
  auto model = engine::Rwkv7Model::load(model_path);
  if (device == "cpu") return engine::make_cpu_backend(std::move(model), options);
  if (device == "gpu") {
#ifdef RWKVD_HAVE_VULKAN
    return engine::make_vk_backend(std::move(model), options);
#else
    throw std::runtime_error("--device gpu: not implemented yet (this build has no Vulkan engine)");
#endif
  }
  throw std::runtime_error("unknown device '" + device + "' (cpu or gpu)");
}

}  // namespace rwkvd::tools
