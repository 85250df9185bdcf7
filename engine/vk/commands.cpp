#include "engine/vk/commands.h"

#include <mutex>

#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {

void submit(Device& dev, std::span<const VkCommandBuffer> cbs, VkFence fence, VkSemaphore timeline,
            uint64_t value) {
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ts.signalSemaphoreValueCount = 1;
  ts.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = static_cast<uint32_t>(cbs.size());
  si.pCommandBuffers = cbs.data();
  if (timeline != VK_NULL_HANDLE) {
    si.pNext = &ts;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &timeline;
  }
  std::lock_guard<std::mutex> lock(dev.queue_mutex());
  RWKVD_VK(vkQueueSubmit(dev.queue(), 1, &si, fence));
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
  RWKVD_VK(vkWaitForFences(dev_.device(), 1, &fence_, VK_TRUE, UINT64_MAX));
}

}  // namespace rwkvd::engine::vk
