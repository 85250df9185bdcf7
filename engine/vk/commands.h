#pragma once
// A command pool and fence for work the host waits on (state transfers, kernel tests), and the
// submit helper every submitter uses (it takes the device's queue mutex).
#include <vulkan/vulkan.h>

#include <cstdint>
#include <functional>
#include <span>

#include "engine/vk/device.h"

namespace rwkvd::engine::vk {

// Timeline semaphore operations of one submission (null semaphores: none).
struct SubmitSync {
  VkSemaphore wait = VK_NULL_HANDLE;  // before the commands' compute and transfer work
  uint64_t wait_value = 0;
  VkSemaphore signal = VK_NULL_HANDLE;  // after every command
  uint64_t signal_value = 0;
};

// Submits command buffers to the compute queue under its mutex; signals `fence` (may be null).
void submit(Device& dev, std::span<const VkCommandBuffer> cbs, VkFence fence,
            const SubmitSync& sync = {});
// The same on the weight upload's queue (Device::transfer_queue()).
void submit_transfer(Device& dev, std::span<const VkCommandBuffer> cbs, VkFence fence,
                     const SubmitSync& sync = {});

// Waits for `fence`, polling it first for up to Device::fence_spin_us(): a decode step is a few
// milliseconds of GPU work the host waits on, and a blocking wait's wake-up adds its latency to
// every step (H100: 0.1B Q4_K_M gen-1 +7-11%, 2.9B +4-6%; docs/PERFORMANCE.md).
void wait_fence(Device& dev, VkFence fence);

class Commands {
 public:
  explicit Commands(Device& dev);
  ~Commands();
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  VkCommandPool pool() const { return pool_; }
  // Records `fn` into a one-shot command buffer, submits it and waits for it.
  void run_now(const std::function<void(VkCommandBuffer)>& fn);
  // Allocates primary command buffers from the pool (freed with the pool).
  void allocate(std::span<VkCommandBuffer> out);
  // Submits and waits.
  void submit_and_wait(std::span<const VkCommandBuffer> cbs);

 private:
  Device& dev_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer one_shot_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace rwkvd::engine::vk
