#pragma once
// The Vulkan backend: make_vk_backend() and what it reports beyond the Backend interface.
#include <functional>
#include <memory>

#include "engine/backend.h"

namespace rwkvd::engine {

namespace vk {
struct Tuning;  // engine/vk/tuning.h
}

struct VkLoadStats {
  double usable_s = 0;  // open -> run() accepted (device, buffers, pipelines ready; upload begun)
  double resident_s = -1;     // open -> every weight on the device (-1 while still uploading)
  uint64_t device_bytes = 0;  // weights on the device
};

class VkBackend : public Backend {
 public:
  // load_stats(): usable_ms = open -> run() accepted (device, buffers, pipelines ready, upload
  // begun); resident_ms = open -> every weight on the device, -1 while still uploading.
  virtual void wait_resident() = 0;                   // blocks until every weight is on the device
  virtual uint32_t dispatches_per_layer() const = 0;  // of a decode step
  virtual uint32_t token_capacity() const = 0;        // tokens per internal forward chunk
  // Compute pipelines made so far: after loading, none more should come (a forward never
  // compiles on its hot path).
  virtual size_t pipelines_made() const = 0;
};

// The device chosen by $RWKVD_DEVICE (see engine/vk/device.h) with its pipelines
// (engine/vk/context.h): made once, it may hold every model a process opens, one after another
// or at the same time. Throws EngineError when there is no usable device. `tuning` changes the
// device's tuning (engine/vk/tuning.h: tests, benchmarks).
class VkContext;
std::shared_ptr<VkContext> make_vk_context(const std::function<void(vk::Tuning&)>& tuning = {});

// Opens the model on `context`, or on a device of its own when that is null (its making then
// counts in load_stats()). Returns once the backend is usable; weights keep streaming in the
// background and run() waits per layer.
std::unique_ptr<VkBackend> make_vk_backend(std::shared_ptr<const Rwkv7Model> model,
                                           const BackendOptions& options = {},
                                           std::shared_ptr<VkContext> context = nullptr);

}  // namespace rwkvd::engine
