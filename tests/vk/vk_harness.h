#pragma once
// A small Vulkan rig for kernel tests: host-visible buffers for every binding of
// shaders/common.glsl, filled and read directly, and a one-shot submit. Validation is on
// (RWKVD_VK_VALIDATION=1 unless the environment says otherwise) and every test checks that
// the layer reported no error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "engine/vk/buffer.h"
#include "engine/vk/commands.h"
#include "engine/vk/device.h"
#include "engine/vk/kernels.h"
#include "engine/vk/pipelines.h"

namespace rwkvd::test {

// Whether the run must have tensor cores (RWKVD_REQUIRE_COOPMAT=1: ctest's run on the
// cooperative-matrix lavapipe), so that their tests fail rather than skip or fall back.
inline bool coopmat_required() {
  const char* v = std::getenv("RWKVD_REQUIRE_COOPMAT");
  return v != nullptr && std::string_view(v) == "1";
}

// Enables validation for every Vulkan device the test binary creates (before the first one).
inline void enable_validation() {
  setenv("RWKVD_VK_VALIDATION", "1", 0);
}

// The NVIDIA driver refuses new instances (VK_ERROR_INCOMPATIBLE_DRIVER) after some 20-30 have
// come and gone in one process, as the loader unloads and reloads it each time; one instance
// held for the whole process keeps it loaded.
inline void keep_driver_loaded() {
  struct Held {
    VkInstance instance = VK_NULL_HANDLE;
    Held() {
      VkInstanceCreateInfo ici{};
      ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
      if (vkCreateInstance(&ici, nullptr, &instance) != VK_SUCCESS) instance = VK_NULL_HANDLE;
    }
    ~Held() {
      if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
    }
  };
  static const Held held;
}

class VkRig {
 public:
  // patch: a change to the device's tuning (engine/vk/tuning.h), e.g. no subgroups.
  explicit VkRig(const engine::vk::TuningPatch& patch = {}) {
    keep_driver_loaded();
    enable_validation();
    dev = std::make_unique<engine::vk::Device>(patch);
    pipes = std::make_unique<engine::vk::Pipelines>(*dev);
    kernels = std::make_unique<engine::vk::Kernels>(*dev, *pipes);
    cmds = std::make_unique<engine::vk::Commands>(*dev);
    fresh_sets();
  }

  // Kernels of the device's tuning changed by `patch` (a kernel variant).
  void retune(const engine::vk::TuningPatch& patch) {
    engine::vk::Tuning t = dev->tuning();
    patch(t);
    kernels = std::make_unique<engine::vk::Kernels>(dev->profile(), t, pipes.get());
  }

  // A new pool of descriptor sets (the old one's sets are gone): for tests that make more than
  // one pool holds, a pool per round.
  void fresh_sets() {
    sets = std::make_unique<engine::vk::DescriptorSets>(*dev, pipes->set_layout(), 128);
  }

  // (Re)creates a binding's buffer with `floats` words, zero-filled.
  engine::vk::Buffer& make(engine::vk::Buffer& b, size_t words) {
    b = engine::vk::Buffer(*dev, std::max<size_t>(words, 4) * 4, engine::vk::MemKind::kUpload);
    std::memset(b.mapped(), 0, b.size());
    return b;
  }
  template <class T>
  T* ptr(engine::vk::Buffer& b) {
    return static_cast<T*>(b.mapped());
  }

  // A descriptor set over the current buffers; weights[i] unset -> vecs.
  VkDescriptorSet set() {
    engine::vk::SetBindings s;
    s.meta = {meta.handle(), 0, VK_WHOLE_SIZE};
    s.act = {act.handle(), 0, VK_WHOLE_SIZE};
    s.vecs = {vecs.handle(), 0, VK_WHOLE_SIZE};
    s.state = {state.handle(), 0, VK_WHOLE_SIZE};
    for (int i = 0; i < 4; ++i) {
      s.weights[i] = weights[i].handle() != VK_NULL_HANDLE
                         ? engine::vk::BufferRange{weights[i].handle(), 0, VK_WHOLE_SIZE}
                         : s.vecs;
    }
    return sets->make(s);
  }

  // Records fn, submits, waits, and makes device writes visible to the host.
  void run(const std::function<void(VkCommandBuffer)>& fn) {
    cmds->run_now([&](VkCommandBuffer cb) {
      engine::vk::Kernels::barrier(cb);
      fn(cb);
      VkMemoryBarrier mb{};
      mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                           1, &mb, 0, nullptr, 0, nullptr);
    });
  }

  std::unique_ptr<engine::vk::Device> dev;
  std::unique_ptr<engine::vk::Pipelines> pipes;
  std::unique_ptr<engine::vk::Kernels> kernels;
  std::unique_ptr<engine::vk::Commands> cmds;
  std::unique_ptr<engine::vk::DescriptorSets> sets;
  engine::vk::Buffer meta, act, vecs, state, weights[4];
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Fails the current test if the validation layer reported errors since `before`.
#define RWKVD_EXPECT_NO_VALIDATION_ERRORS(before)                       \
  EXPECT_EQ(::rwkvd::engine::vk::Device::validation_errors(), (before)) \
      << "Vulkan validation errors"

}  // namespace rwkvd::test
