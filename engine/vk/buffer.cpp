#include "engine/vk/buffer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {
namespace {

// RWKVD_VK_TRACE=alloc: a stderr line per buffer made (its size, kind and time: where a load's
// set-up goes, the driver's part of it).
bool trace_allocations() {
  static const bool on = traces("alloc");
  return on;
}

const char* kind_name(MemKind k) {
  switch (k) {
    case MemKind::kDevice:
      return "device";
    case MemKind::kUpload:
      return "upload";
    case MemKind::kReadback:
      return "readback";
    case MemKind::kDeviceMapped:
      return "device-mapped";
  }
  return "?";
}

}  // namespace

Buffer::Buffer(Device& dev, VkDeviceSize size, MemKind kind, bool upload_target)
    : dev_(dev.device()), size_(size) {
  const auto start = std::chrono::steady_clock::now();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = std::max<VkDeviceSize>(size, 16);
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const uint32_t families[2] = {dev.queue_family(), dev.transfer_family()};
  if (upload_target && dev.dedicated_transfer()) {
    bci.sharingMode = VK_SHARING_MODE_CONCURRENT;
    bci.queueFamilyIndexCount = 2;
    bci.pQueueFamilyIndices = families;
  }
  RWKVD_VK(vkCreateBuffer(dev_, &bci, nullptr, &buf_));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev_, buf_, &req);
  uint32_t type = 0;
  switch (kind) {
    case MemKind::kDevice:
      type = dev.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
      break;
    case MemKind::kUpload:
      type = dev.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
      break;
    case MemKind::kReadback:
      type = dev.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                             VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
      break;
    case MemKind::kDeviceMapped:
      type = dev.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                             VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
      break;
  }
  // Each buffer has an allocation of its own, and says so (Vulkan 1.1's dedicated allocation):
  // NVIDIA's driver then makes 1 GiB of device memory in ~0.8 ms instead of ~19
  // (vk_alloc_bench, H200), most of what a load's "usable" time was
  // (Tuning::dedicated_allocations).
  VkMemoryDedicatedAllocateInfo dedicated{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  dedicated.buffer = buf_;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = dev.tuning().dedicated_allocations ? &dedicated : nullptr;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  const VkResult r = vkAllocateMemory(dev_, &mai, nullptr, &mem_);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev_, buf_, nullptr);
    vk_fail(r, "vkAllocateMemory");
  }
  RWKVD_VK(vkBindBufferMemory(dev_, buf_, mem_, 0));
  const VkMemoryPropertyFlags flags = dev.mem_props().memoryTypes[type].propertyFlags;
  coherent_ = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  atom_ = dev.props().limits.nonCoherentAtomSize;
  if (kind != MemKind::kDevice) RWKVD_VK(vkMapMemory(dev_, mem_, 0, VK_WHOLE_SIZE, 0, &map_));
  if (trace_allocations()) {
    std::fprintf(stderr, "rwkvd: vulkan: buffer %.1f MiB %s in %.2f ms\n",
                 static_cast<double>(size) / (1 << 20), kind_name(kind),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    dev_ = std::exchange(o.dev_, VK_NULL_HANDLE);
    buf_ = std::exchange(o.buf_, VK_NULL_HANDLE);
    mem_ = std::exchange(o.mem_, VK_NULL_HANDLE);
    size_ = std::exchange(o.size_, 0);
    map_ = std::exchange(o.map_, nullptr);
    coherent_ = o.coherent_;
    atom_ = o.atom_;
  }
  return *this;
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() {
  if (dev_ == VK_NULL_HANDLE) return;
  if (buf_ != VK_NULL_HANDLE) vkDestroyBuffer(dev_, buf_, nullptr);
  if (mem_ != VK_NULL_HANDLE) vkFreeMemory(dev_, mem_, nullptr);
  buf_ = VK_NULL_HANDLE;
  mem_ = VK_NULL_HANDLE;
  dev_ = VK_NULL_HANDLE;
}

void Buffer::flush(VkDeviceSize offset, VkDeviceSize size) const {
  if (coherent_ || size == 0) return;
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  r.memory = mem_;
  r.offset = offset / atom_ * atom_;
  r.size = VK_WHOLE_SIZE;
  RWKVD_VK(vkFlushMappedMemoryRanges(dev_, 1, &r));
}

void Buffer::invalidate(VkDeviceSize offset, VkDeviceSize size) const {
  if (coherent_ || size == 0) return;
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  r.memory = mem_;
  r.offset = offset / atom_ * atom_;
  r.size = VK_WHOLE_SIZE;
  RWKVD_VK(vkInvalidateMappedMemoryRanges(dev_, 1, &r));
}

}  // namespace rwkvd::engine::vk
