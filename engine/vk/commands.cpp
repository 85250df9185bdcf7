#include "engine/vk/commands.h"

#include <chrono>
#include <mutex>

#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {

namespace {

void submit_to(VkQueue queue, std::mutex& mu, std::span<const VkCommandBuffer> cbs, VkFence fence,
               const SubmitSync& sync) {
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ts;
  si.commandBufferCount = static_cast<uint32_t>(cbs.size());
  si.pCommandBuffers = cbs.data();
  const VkPipelineStageFlags wait_stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  if (sync.wait != VK_NULL_HANDLE) {
    si.waitSemaphoreCount = 1;
    si.pWaitSemaphores = &sync.wait;
    si.pWaitDstStageMask = &wait_stages;
    ts.waitSemaphoreValueCount = 1;
    ts.pWaitSemaphoreValues = &sync.wait_value;
  }
  if (sync.signal != VK_NULL_HANDLE) {
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &sync.signal;
    ts.signalSemaphoreValueCount = 1;
    ts.pSignalSemaphoreValues = &sync.signal_value;
  }
  std::lock_guard<std::mutex> lock(mu);
  RWKVD_VK(vkQueueSubmit(queue, 1, &si, fence));
}

}  // namespace

void wait_fence(Device& dev, VkFence fence) {
  if (const uint64_t spin_us = dev.fence_spin_us(); spin_us > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
    do {
      const VkResult r = vkGetFenceStatus(dev.device(), fence);
      if (r == VK_SUCCESS) return;
      if (r != VK_NOT_READY) RWKVD_VK(r);
    } while (std::chrono::steady_clock::now() < until);
  }
  RWKVD_VK(vkWaitForFences(dev.device(), 1, &fence, VK_TRUE, UINT64_MAX));
}

void submit(Device& dev, std::span<const VkCommandBuffer> cbs, VkFence fence,
            const SubmitSync& sync) {
  submit_to(dev.queue(), dev.queue_mutex(), cbs, fence, sync);
}

void submit_transfer(Device& dev, std::span<const VkCommandBuffer> cbs, VkFence fence,
                     const SubmitSync& sync) {
  submit_to(dev.transfer_queue(), dev.transfer_mutex(), cbs, fence, sync);
}

Commands::Commands(Device& dev) : dev_(dev) {
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = dev.queue_family();
  RWKVD_VK(vkCreateCommandPool(dev.device(), &pci, nullptr, &pool_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  RWKVD_VK(vkCreateFence(dev.device(), &fci, nullptr, &fence_));
  allocate({&one_shot_, 1});
}

Commands::~Commands() {
  vkDestroyFence(dev_.device(), fence_, nullptr);
  vkDestroyCommandPool(dev_.device(), pool_, nullptr);
}

void Commands::allocate(std::span<VkCommandBuffer> out) {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = static_cast<uint32_t>(out.size());
  RWKVD_VK(vkAllocateCommandBuffers(dev_.device(), &ai, out.data()));
}

void Commands::run_now(const std::function<void(VkCommandBuffer)>& fn) {
  RWKVD_VK(vkResetCommandBuffer(one_shot_, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  RWKVD_VK(vkBeginCommandBuffer(one_shot_, &bi));
  fn(one_shot_);
  RWKVD_VK(vkEndCommandBuffer(one_shot_));
  submit_and_wait({&one_shot_, 1});
}

void Commands::submit_and_wait(std::span<const VkCommandBuffer> cbs) {
  RWKVD_VK(vkResetFences(dev_.device(), 1, &fence_));
  submit(dev_, cbs, fence_);
  wait_fence(dev_, fence_);
}

}  // namespace rwkvd::engine::vk
