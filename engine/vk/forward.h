#pragma once
// The RWKV-7 forward as Vulkan work: the buffers and descriptor sets of a model, and command
// buffers that record what the forward's plan (forward_plan.h) says for a batch shape (tokens,
// sequences, output rows), recorded once per shape and replayed. While the weights upload, a
// shape has n_layer + 2 command buffers, one per upload segment (embedding, layer l, head), so a
// forward can start while later layers are still uploading; once they are resident, one.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "engine/vk/buffer.h"
#include "engine/vk/commands.h"
#include "engine/vk/forward_plan.h"
#include "engine/vk/kernels.h"
#include "engine/vk/profiler.h"
#include "engine/vk/weights.h"

namespace rwkvd::engine::vk {

// A Forward's buffers (activations, the state slots, the batch description, the readback),
// which depend only on the device and the model's shape: a caller can have them made on another
// thread while it sets up the weights (2.9B on the H100: ~80 ms, 37 of them a readback of 512
// rows).
struct ForwardBuffers {
  // token_cap: most tokens per chunk (fewer where the device's storage buffer range cannot hold
  // their activations); seq_cap: most sequences per chunk; n_slots: state slots.
  static ForwardBuffers make(Device& dev, const Rwkv7Hparams& hp, uint32_t token_cap,
                             uint32_t seq_cap, uint32_t n_slots);
  ForwardGeometry geometry;
  Buffer act, state, meta, readback;
  double seconds = 0, readback_seconds = 0;  // their making, and of that the readback's
};

class Forward {
 public:
  Forward(Device& dev, Pipelines& pipes, WeightStore& weights, const Rwkv7Model& model,
          ForwardBuffers buffers);
  ~Forward();

  // Creates the pipelines a Forward of `model` will need (they depend only on the device and the
  // model's types), so that a caller can have them made while it sets up the weights.
  static void prepare_pipelines(Device& dev, Pipelines& pipes, const Rwkv7Model& model);

  const ForwardGeometry& geometry() const { return g_; }
  uint32_t token_cap() const { return g_.token_cap; }
  uint32_t seq_cap() const { return g_.seq_cap; }
  uint32_t out_cap() const { return g_.out_cap; }  // output rows a forward may have
  uint32_t meta_seq() const { return g_.meta_seq(); }
  uint32_t meta_out() const { return g_.meta_out(); }
  VkDeviceSize readback_logits_offset() const { return g_.readback_logits_offset(); }
  Buffer& meta() { return meta_; }
  // The state slots on the device (docs/STATE_LAYOUT.md, one after another). They grow when a
  // slot past them is first needed: ensure_slots() makes room for `needed` (doubling, at most
  // `most`), keeping every state; a slot past them holds the zero state. Throws EngineError,
  // keeping the slots it had, where the device has no memory for them.
  Buffer& state() { return state_; }
  uint32_t slot_capacity() const { return slot_cap_; }
  void ensure_slots(uint32_t needed, uint32_t most);
  Buffer& readback() { return readback_; }
  uint64_t scratch_bytes() const { return act_.size() + meta_.size() + readback_.size(); }
  const ForwardPlanner& planner() const { return *planner_; }
  // Kernels::choices() as this model uses them (the LoRA fusion also needs F32 LoRA weights).
  std::vector<std::string> kernel_choices() const { return planner_->kernel_choices(); }

  // The shape's command buffers, recorded on first use: one per upload segment, so that each
  // can go as soon as its weights are resident, or (whole) one for the forward once all are.
  // Submitting 34 command buffers instead of one cost the host ~0.5 ms per 2.9B token.
  const std::vector<VkCommandBuffer>& commands(const ForwardShape& shape, bool whole);
  // How many times commands() has recorded a shape (reports: a first use costs the recording).
  size_t shapes_recorded() const { return shapes_recorded_; }
  // After the shape's command buffers completed: adds their kernel times to the profile
  // ($RWKVD_VK_PROFILE; nothing otherwise).
  void collect_profile(const ForwardShape& shape, bool whole);
  Profiler& profiler() { return profiler_; }
  // Dispatches of the last layer in a decode step of one token (for reports and tests).
  uint32_t dispatches_per_layer() const { return dispatches_per_layer_; }

 private:
  struct Recorded {
    std::vector<VkCommandBuffer> cbs;
    std::vector<uint32_t> profile;  // profiler recording of each command buffer
  };
  void make_sets();
  void forget_recordings();
  void write_shift_records();
  VkDescriptorSet set_of(const SetRef& ref) const;
  void record(VkCommandBuffer cb, uint32_t segment, const ForwardShape& s, uint32_t prof);

  Device& dev_;
  Pipelines& pipes_;
  WeightStore& w_;
  const Rwkv7Model& model_;
  ForwardGeometry g_;
  Kernels kernels_;
  Buffer act_, state_, meta_, readback_;
  uint64_t slot_bytes_ = 0;
  uint32_t slot_cap_ = 0;
  std::unique_ptr<ForwardPlanner> planner_;
  std::unique_ptr<DescriptorSets> sets_;
  VkDescriptorSet base_set_ = VK_NULL_HANDLE, embed_set_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> group_sets_, lora_sets_;
  Commands cmds_;
  Profiler profiler_;
  std::map<std::pair<ForwardShape, bool>, Recorded> recorded_;  // (shape, whole)
  uint32_t dispatches_per_layer_ = 0;
  size_t shapes_recorded_ = 0;
};

}  // namespace rwkvd::engine::vk
