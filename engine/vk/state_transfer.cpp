#include "engine/vk/state_transfer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "engine/vk/commands.h"
#include "engine/vk/kernels.h"
#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {
namespace {

VkDeviceSize part_bytes_setting() {
  if (const char* v = std::getenv("RWKVD_VK_STATE_PART_BYTES"); v != nullptr && *v != '\0') {
    return std::strtoull(v, nullptr, 10);
  }
  return VkDeviceSize{4} << 20;
}

}  // namespace

StateTransfer::StateTransfer(Device& dev, VkDeviceSize slot_bytes, cpu::ThreadPool& copiers)
    : dev_(dev),
      slot_bytes_(slot_bytes),
      up_(dev, slot_bytes, MemKind::kUpload),
      down_(dev, slot_bytes, MemKind::kReadback),
      copiers_(copiers) {
  const VkDeviceSize want = part_bytes_setting();
  part_bytes_ = want == 0 ? slot_bytes : std::min(slot_bytes, want);
  const auto n = static_cast<uint32_t>((slot_bytes + part_bytes_ - 1) / part_bytes_);
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = dev.queue_family();
  RWKVD_VK(vkCreateCommandPool(dev.device(), &pci, nullptr, &pool_));
  cbs_.resize(n);
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = n;
  RWKVD_VK(vkAllocateCommandBuffers(dev.device(), &ai, cbs_.data()));
  VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &tci;
  RWKVD_VK(vkCreateSemaphore(dev.device(), &sci, nullptr, &timeline_));
}

StateTransfer::~StateTransfer() {
  if (value_ > 0) {  // a part still in flight after an exception must not outlive its buffers
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    wi.pSemaphores = &timeline_;
    wi.pValues = &value_;
    vkWaitSemaphores(dev_.device(), &wi, UINT64_MAX);
  }
  vkDestroySemaphore(dev_.device(), timeline_, nullptr);
  vkDestroyCommandPool(dev_.device(), pool_, nullptr);
}

VkDeviceSize StateTransfer::part_size(uint32_t i) const {
  return std::min(part_bytes_, slot_bytes_ - part_offset(i));
}

uint64_t StateTransfer::submit_part(uint32_t i, VkBuffer from, VkDeviceSize from_offset,
                                    VkBuffer to, VkDeviceSize to_offset, bool to_host) {
  VkCommandBuffer cb = cbs_[i];
  RWKVD_VK(vkResetCommandBuffer(cb, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  RWKVD_VK(vkBeginCommandBuffer(cb, &bi));
  Kernels::barrier(cb);  // the forward's writes before a read, its reads before a write
  const VkBufferCopy r{from_offset + part_offset(i), to_offset + part_offset(i), part_size(i)};
  vkCmdCopyBuffer(cb, from, to, 1, &r);
  if (to_host) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                         0, nullptr, 0, nullptr);
  }
  RWKVD_VK(vkEndCommandBuffer(cb));
  SubmitSync sync;
  sync.signal = timeline_;
  sync.signal_value = ++value_;
  submit(dev_, {&cb, 1}, VK_NULL_HANDLE, sync);
  return value_;
}

void StateTransfer::wait(uint64_t value) {
  // Polled first, as wait_fence() does: a part takes ~0.1-0.5 ms, less than a blocking wait's
  // wake-up on some drivers.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::microseconds(dev_.fence_spin_us());
  uint64_t now = 0;
  while (std::chrono::steady_clock::now() < until) {
    RWKVD_VK(vkGetSemaphoreCounterValue(dev_.device(), timeline_, &now));
    if (now >= value) return;
  }
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  RWKVD_VK(vkWaitSemaphores(dev_.device(), &wi, UINT64_MAX));
}

void StateTransfer::copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kBlock = size_t{1} << 20;
  copiers_.parallel_for((bytes + kBlock - 1) / kBlock, [&](size_t b0, size_t b1, unsigned) {
    const size_t begin = b0 * kBlock, end = std::min(bytes, b1 * kBlock);
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                end - begin);
  });
}

void StateTransfer::read(VkBuffer state, VkDeviceSize offset, void* dst) {
  // Every part's copy is queued at once; the host takes each as it lands.
  std::vector<uint64_t> done(parts());
  for (uint32_t i = 0; i < parts(); ++i) {
    done[i] = submit_part(i, state, offset, down_.handle(), 0, /*to_host=*/true);
  }
  for (uint32_t i = 0; i < parts(); ++i) {
    wait(done[i]);
    down_.invalidate(part_offset(i), part_size(i));
    copy(static_cast<char*>(dst) + part_offset(i),
         static_cast<const char*>(down_.mapped()) + part_offset(i), part_size(i));
  }
}

void StateTransfer::write(VkBuffer state, VkDeviceSize offset, const void* src) {
  // Each part's copy is queued as soon as the host has put it in the transfer buffer.
  uint64_t last = 0;
  for (uint32_t i = 0; i < parts(); ++i) {
    copy(static_cast<char*>(up_.mapped()) + part_offset(i),
         static_cast<const char*>(src) + part_offset(i), part_size(i));
    up_.flush(part_offset(i), part_size(i));
    last = submit_part(i, up_.handle(), 0, state, offset, /*to_host=*/false);
  }
  wait(last);
}

}  // namespace rwkvd::engine::vk
