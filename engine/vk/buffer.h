#pragma once
// Device memory. rwkvd makes a handful of large buffers, each with its own allocation (weights,
// activations, state, staging, readback), and places everything inside them by offset: nothing
// is allocated per dispatch or per request.
#include <vulkan/vulkan.h>

#include <cstdint>

#include "engine/vk/device.h"

namespace rwkvd::engine::vk {

// kDevice: device-local, not mapped. kUpload: host memory the device reads (staging).
// kReadback: host-cached memory the device writes. kDeviceMapped: small data the host writes and
// kernels read many times (the per-forward batch description): device-local and host-visible
// where the device offers it (resizable BAR), else plain host-visible memory.
enum class MemKind { kDevice, kUpload, kReadback, kDeviceMapped };

class Buffer {
 public:
  Buffer() = default;
  // Every kind but kDevice is host-visible and stays mapped. `upload_target`: written by the
  // weight upload's queue and read by the compute queue, so shared by both families
  // (concurrent sharing: no ownership transfers between the two) where they differ.
  Buffer(Device& dev, VkDeviceSize size, MemKind kind, bool upload_target = false);
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buf_; }
  VkDeviceSize size() const { return size_; }
  void* mapped() const { return map_; }
  // Makes host writes visible to the device / device writes visible to the host where the
  // memory is not coherent.
  void flush(VkDeviceSize offset, VkDeviceSize size) const;
  void invalidate(VkDeviceSize offset, VkDeviceSize size) const;

 private:
  void release();
  VkDevice dev_ = VK_NULL_HANDLE;
  VkBuffer buf_ = VK_NULL_HANDLE;
  VkDeviceMemory mem_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  void* map_ = nullptr;
  bool coherent_ = true;
  VkDeviceSize atom_ = 1;
};

// Bump placement inside a buffer to be created later: plan offsets first, then allocate once.
class Placer {
 public:
  explicit Placer(VkDeviceSize align) : align_(align) {}
  VkDeviceSize place(VkDeviceSize size) {
    const VkDeviceSize at = (end_ + align_ - 1) / align_ * align_;
    end_ = at + size;
    return at;
  }
  VkDeviceSize size() const { return end_; }

 private:
  VkDeviceSize align_;
  VkDeviceSize end_ = 0;
};

// A region of a buffer, as bound to a descriptor.
struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize range = 0;
};

}  // namespace rwkvd::engine::vk
