// What the driver takes to make a buffer of device memory, by size and by how it is asked for
// (host time, Google Benchmark's real time): a load's "usable" figure is mostly such allocations
// (weights, activations, state slots: 3.9 GB for 2.9B; RWKVD_VK_TRACE=alloc lists them).
//   vk_alloc_bench [--benchmark_filter=REGEX]
// Modes: 0 a buffer and its own allocation, as engine/vk/buffer.cpp makes them; 1 the same with
// VkMemoryDedicatedAllocateInfo (the allocation names its buffer); 2 the allocation alone, no
// buffer; 3 mode 0 in pinned host memory (the staging and transfer buffers); 4 mode 1 in pinned
// host memory.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>

#include "engine/vk/device.h"
#include "engine/vk/vk_check.h"

namespace {

using namespace rwkvd::engine::vk;

Device& device() {
  static Device dev;
  return dev;
}

void BM_Allocate(benchmark::State& state) {
  Device& dev = device();
  const VkDeviceSize bytes = static_cast<VkDeviceSize>(state.range(0)) << 20;
  const auto mode = static_cast<int>(state.range(1));
  const bool host = mode >= 3;
  const VkMemoryPropertyFlags want =
      host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    VkBuffer buf = VK_NULL_HANDLE;
    VkMemoryRequirements req{};
    if (mode != 2) {
      VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
      bci.size = bytes;
      bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                  VK_BUFFER_USAGE_TRANSFER_DST_BIT;
      RWKVD_VK(vkCreateBuffer(dev.device(), &bci, nullptr, &buf));
      vkGetBufferMemoryRequirements(dev.device(), buf, &req);
    } else {
      req.size = bytes;
      req.memoryTypeBits = ~0u;
    }
    VkMemoryDedicatedAllocateInfo dedicated{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
    dedicated.buffer = buf;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.pNext = mode == 1 || mode == 4 ? &dedicated : nullptr;
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = dev.memory_type(req.memoryTypeBits, want);
    VkDeviceMemory mem = VK_NULL_HANDLE;
    RWKVD_VK(vkAllocateMemory(dev.device(), &mai, nullptr, &mem));
    if (buf != VK_NULL_HANDLE) RWKVD_VK(vkBindBufferMemory(dev.device(), buf, mem, 0));
    void* map = nullptr;
    if (host) RWKVD_VK(vkMapMemory(dev.device(), mem, 0, VK_WHOLE_SIZE, 0, &map));
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (buf != VK_NULL_HANDLE) vkDestroyBuffer(dev.device(), buf, nullptr);
    vkFreeMemory(dev.device(), mem, nullptr);
  }
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"MiB", "mode"});
  for (const int mib : {64, 1024, 2048}) {
    for (const int mode : {0, 1, 2}) b->Args({mib, mode});
  }
  b->Args({64, 3});
  b->Args({64, 4});
}

}  // namespace

BENCHMARK(BM_Allocate)->Apply(args)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
