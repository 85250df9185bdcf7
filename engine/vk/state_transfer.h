#pragma once
// Moves one state slot between device memory and host memory through mapped transfer buffers, in
// parts that overlap: while the GPU copies part i + 1 the host copies part i (a 2.9B state is
// 21.6 MB: a pass over PCIe and a memcpy each way, which otherwise run one after the other).
// $RWKVD_VK_STATE_PART_BYTES sets the part size (default 4 MiB; 0: the whole slot in one part).
#include <vulkan/vulkan.h>

#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/vk/buffer.h"
#include "engine/vk/device.h"

namespace rwkvd::engine::vk {

class StateTransfer {
 public:
  // `copiers`: the threads that copy on the host (the backend's, shared with its output rows).
  StateTransfer(Device& dev, VkDeviceSize slot_bytes, cpu::ThreadPool& copiers);
  ~StateTransfer();
  StateTransfer(const StateTransfer&) = delete;
  StateTransfer& operator=(const StateTransfer&) = delete;

  // slot_bytes of `state` from `offset` into dst / from src; return when the copy is complete.
  // The forward's writes before (read) and reads after (write) are ordered by barriers.
  void read(VkBuffer state, VkDeviceSize offset, void* dst);
  void write(VkBuffer state, VkDeviceSize offset, const void* src);

  VkDeviceSize buffer_bytes() const { return up_.size() + down_.size(); }
  uint32_t parts() const { return static_cast<uint32_t>(cbs_.size()); }

 private:
  VkDeviceSize part_offset(uint32_t i) const { return i * part_bytes_; }
  VkDeviceSize part_size(uint32_t i) const;
  // Records part i's copy between `from` and `to` (barriers on both sides) and submits it,
  // signalling the timeline at the returned value.
  uint64_t submit_part(uint32_t i, VkBuffer from, VkDeviceSize from_offset, VkBuffer to,
                       VkDeviceSize to_offset, bool to_host);
  void wait(uint64_t value);
  // bytes on the copiers' threads, 1 MiB blocks.
  void copy(void* dst, const void* src, size_t bytes);

  Device& dev_;
  const VkDeviceSize slot_bytes_;
  VkDeviceSize part_bytes_ = 0;
  Buffer up_, down_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> cbs_;  // one a part
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t value_ = 0;  // last value signalled
  cpu::ThreadPool& copiers_;
};

}  // namespace rwkvd::engine::vk
