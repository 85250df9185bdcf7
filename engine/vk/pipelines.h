#pragma once
// Compute pipelines built from the embedded SPIR-V. All kernels share one descriptor set layout
// (shaders/common.glsl: meta, act, vecs, state, weights[4]) and one 128-byte push-constant
// range, so a descriptor set can be bound once and reused by many dispatches. Sizes are
// specialization constants. Pipelines are created once per (shader, constants) and kept; the
// VkPipelineCache is loaded from / saved to disk (pipelines.cpp: cache_path()).
#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/vk/buffer.h"
#include "engine/vk/device.h"

namespace rwkvd::engine::vk {

constexpr uint32_t kWeightBindings = 4;
constexpr uint32_t kPushConstantBytes = 128;

class Pipelines {
 public:
  explicit Pipelines(Device& dev);
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  using Key = std::pair<std::string, std::vector<uint32_t>>;  // shader name, constants

  // The pipeline for embedded shader `name` with specialization constants 0..n-1 = `spec`.
  VkPipeline get(const std::string& name, const std::vector<uint32_t>& spec);
  // Creates every missing pipeline of `keys` at once, on several threads: a first start
  // without a pipeline cache compiles dozens of them, one after another ~5 s on an H100.
  void prepare(const std::vector<Key>& keys);
  // Pipelines made so far.
  size_t count();
  // From now on shader `name` is `words` (which must outlive this): benchmarks put their own
  // builds (bench/: diagnostic variants that give wrong results, kernels the product never runs)
  // in a shader's place. Call before any pipeline of `name` is made.
  void use_shader(const std::string& name, std::span<const uint32_t> words);
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  Device& dev_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::string cache_path_;  // empty: the cache is not kept between runs
  // Compiles one pipeline (no map access: callers hold mu_ or run in prepare()'s threads; the
  // VkPipelineCache synchronizes itself).
  VkPipeline create(const Key& key) const;
  std::mutex mu_;
  std::map<Key, VkPipeline> pipelines_;
  std::map<std::string, std::span<const uint32_t>> replaced_;  // use_shader()
};

// The buffers one descriptor set binds. Unused weight slots repeat weights[0].
struct SetBindings {
  BufferRange meta, act, vecs, state;
  BufferRange weights[kWeightBindings];
};

// A pool of descriptor sets written once and then reused by recorded command buffers.
class DescriptorSets {
 public:
  DescriptorSets(Device& dev, VkDescriptorSetLayout layout, uint32_t max_sets);
  ~DescriptorSets();
  DescriptorSets(const DescriptorSets&) = delete;
  DescriptorSets& operator=(const DescriptorSets&) = delete;
  VkDescriptorSet make(const SetBindings& b);

 private:
  Device& dev_;
  VkDescriptorSetLayout layout_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
};

}  // namespace rwkvd::engine::vk
