#include "engine/vk/forward.h"

#include <algorithm>
#include <chrono>

#include "engine/error.h"
#include "engine/vk/step_recorder.h"
#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {

ForwardBuffers ForwardBuffers::make(Device& dev, const Rwkv7Hparams& hp, uint32_t token_cap,
                                    uint32_t seq_cap, uint32_t n_slots) {
  ForwardBuffers b;
  b.geometry =
      ForwardGeometry::fit(hp, token_cap, seq_cap, dev.props().limits.maxStorageBufferRange);
  const ForwardGeometry& g = b.geometry;
  const auto start = std::chrono::steady_clock::now();
  b.act = Buffer(dev, VkDeviceSize{g.act.total} * 4, MemKind::kDevice);
  b.state = Buffer(dev, VkDeviceSize{n_slots} * hp.state_floats() * 4, MemKind::kDevice);
  // Every row kernel and wkv reads the batch description, some through two dependent loads:
  // from host memory each such load crosses PCIe, microseconds per dispatch.
  const MemKind meta_kind =
      dev.tuning().meta_device_local ? MemKind::kDeviceMapped : MemKind::kUpload;
  b.meta = Buffer(dev, g.meta_bytes(), meta_kind);
  const auto readback_start = std::chrono::steady_clock::now();
  b.readback = Buffer(dev, g.readback_bytes(), MemKind::kReadback);
  b.readback_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - readback_start).count();
  Commands cmds(dev);  // its own pool: this may run on another thread than the Forward's
  cmds.run_now([&](VkCommandBuffer cb) {
    vkCmdFillBuffer(cb, b.state.handle(), 0, VK_WHOLE_SIZE, 0);
    vkCmdFillBuffer(cb, b.act.handle(), 0, VK_WHOLE_SIZE, 0);
  });
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return b;
}

Forward::Forward(Device& dev, Pipelines& pipes, WeightStore& weights, const Rwkv7Model& model,
                 ForwardBuffers buffers)
    : dev_(dev),
      pipes_(pipes),
      w_(weights),
      model_(model),
      g_(buffers.geometry),
      kernels_(dev, pipes),
      act_(std::move(buffers.act)),
      state_(std::move(buffers.state)),
      meta_(std::move(buffers.meta)),
      readback_(std::move(buffers.readback)),
      slot_bytes_(model.hparams().state_floats() * 4),
      slot_cap_(static_cast<uint32_t>(state_.size() / slot_bytes_)),
      planner_(std::make_unique<ForwardPlanner>(kernels_, model, weights.layout(), g_)),
      cmds_(dev),
      profiler_(dev) {
  make_sets();
  const ForwardPlanner::PipelineNeeds needs = ForwardPlanner::pipeline_needs(model, kernels_);
  const Rwkv7Hparams& hp = model.hparams();
  kernels_.warm(needs.types, hp.n_embd, hp.head_size, needs.lora_ranks, model_.head->type);
  write_shift_records();
  // The last layer has every product.
  const std::vector<Step> layer = planner_->segment(hp.n_layer, ForwardShape{1, 1, 1, 1});
  for (const PlannedDispatch& d : planned_dispatches(kernels_, layer)) {
    if (!d.dispatch.key.first.empty()) ++dispatches_per_layer_;
  }
}

Forward::~Forward() = default;

// The base set (activations, state, meta, vecs), the embedding's, one per product group and one
// per layer whose LoRA up products wkv does.
void Forward::make_sets() {
  const auto& groups = planner_->groups();
  const auto& lora = planner_->lora_up();
  group_sets_.clear();
  lora_sets_.clear();
  sets_.reset();
  sets_ = std::make_unique<DescriptorSets>(dev_, pipes_.set_layout(),
                                           static_cast<uint32_t>(2 + groups.size() + lora.size()));
  SetBindings base;
  base.meta = {meta_.handle(), 0, VK_WHOLE_SIZE};
  base.act = {act_.handle(), 0, VK_WHOLE_SIZE};
  base.vecs = {w_.vecs().handle(), 0, VK_WHOLE_SIZE};
  base.state = {state_.handle(), 0, VK_WHOLE_SIZE};
  base.weights[0] = base.vecs;  // kernels without weights still need a valid binding
  base_set_ = sets_->make(base);
  const auto with_weights = [&](std::span<const GgufTensor* const> tensors) {
    SetBindings b = base;
    for (size_t i = 0; i < tensors.size(); ++i) b.weights[i] = w_.range(tensors[i]);
    return sets_->make(b);
  };
  embed_set_ = with_weights(std::span(&model_.token_embd, 1));
  for (const ProductGroup& g : groups) group_sets_.push_back(with_weights(g.tensors));
  for (const auto& up : lora) lora_sets_.push_back(with_weights(up));
}

// The arguments of the shifts that products run in front, written once after the batch
// description.
void Forward::write_shift_records() {
  const auto records = planner_->shift_records();
  if (records.empty()) return;
  auto* meta = static_cast<uint32_t*>(meta_.mapped());
  for (const auto& [at, words] : records) {
    std::copy(words.begin(), words.end(), meta + at);
  }
  meta_.flush(0, meta_.size());
}

void Forward::prepare_pipelines(Device& dev, Pipelines& pipes, const Rwkv7Model& model) {
  Kernels kernels(dev, pipes);
  const ForwardPlanner::PipelineNeeds needs = ForwardPlanner::pipeline_needs(model, kernels);
  kernels.warm(needs.types, model.hparams().n_embd, model.hparams().head_size, needs.lora_ranks,
               model.head->type);
}

VkDescriptorSet Forward::set_of(const SetRef& ref) const {
  switch (ref.kind) {
    case SetRef::Kind::kEmbed:
      return embed_set_;
    case SetRef::Kind::kGroup:
      return group_sets_.at(ref.index);
    case SetRef::Kind::kLora:
      return lora_sets_.at(ref.index);
    case SetRef::Kind::kBase:
      break;
  }
  return base_set_;
}

void Forward::collect_profile(const ForwardShape& shape, bool whole) {
  if (!profiler_.enabled()) return;
  if (auto it = recorded_.find({shape, whole}); it != recorded_.end()) {
    profiler_.collect(it->second.profile);
  }
}

void Forward::forget_recordings() {
  for (auto& [s, r] : recorded_) {
    vkFreeCommandBuffers(dev_.device(), cmds_.pool(), static_cast<uint32_t>(r.cbs.size()),
                         r.cbs.data());
    profiler_.forget(r.profile);
  }
  recorded_.clear();
}

// The states move into a larger buffer; the descriptor sets that bind it are made anew, and
// with them every recorded command buffer (which binds them).
void Forward::ensure_slots(uint32_t needed, uint32_t most) {
  if (needed <= slot_cap_) return;
  if (needed > most) {
    throw EngineError("vulkan: state slot " + std::to_string(needed - 1) + " is past the " +
                      std::to_string(most) + " slots");
  }
  const uint32_t cap = std::min(most, std::max(needed, 2 * slot_cap_));
  const VkDeviceSize bytes = VkDeviceSize{cap} * slot_bytes_;
  Buffer grown;
  try {
    grown = Buffer(dev_, bytes, MemKind::kDevice);
  } catch (const EngineError& e) {
    throw EngineError("vulkan: no device memory for " + std::to_string(cap) + " state slots (" +
                      std::to_string(bytes >> 20) + " MiB; " + std::to_string(slot_cap_) +
                      " held): " + e.what());
  }
  cmds_.run_now([&](VkCommandBuffer cb) {
    Kernels::barrier(cb);  // after the forwards and transfers that wrote the states
    const VkBufferCopy kept{0, 0, state_.size()};
    vkCmdCopyBuffer(cb, state_.handle(), grown.handle(), 1, &kept);
    vkCmdFillBuffer(cb, grown.handle(), state_.size(), bytes - state_.size(), 0);
  });
  forget_recordings();
  state_ = std::move(grown);
  slot_cap_ = cap;
  make_sets();
}

const std::vector<VkCommandBuffer>& Forward::commands(const ForwardShape& shape, bool whole) {
  if (auto it = recorded_.find({shape, whole}); it != recorded_.end()) return it->second.cbs;
  if (recorded_.size() >= 64) forget_recordings();  // bound the cache: decode shapes repeat
  const uint32_t segments = planner_->n_segments();
  Recorded r;
  r.cbs.resize(whole ? 1 : segments);
  cmds_.allocate(r.cbs);
  for (VkCommandBuffer cb : r.cbs) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    RWKVD_VK(vkBeginCommandBuffer(cb, &bi));
  }
  for (uint32_t s = 0; s < segments; ++s) {
    VkCommandBuffer cb = r.cbs[whole ? 0 : s];
    Kernels::barrier(cb);  // after the previous segment / chunk / state transfer
    r.profile.push_back(profiler_.begin(cb, shape.T));
    record(cb, s, shape, r.profile.back());
  }
  for (VkCommandBuffer cb : r.cbs) RWKVD_VK(vkEndCommandBuffer(cb));
  ++shapes_recorded_;
  return recorded_.emplace(std::pair{shape, whole}, std::move(r)).first->second.cbs;
}

// What the plan says for the segment, each step's time stamped under its label.
void Forward::record(VkCommandBuffer cb, uint32_t segment, const ForwardShape& s, uint32_t prof) {
  for (const Step& step : planner_->segment(segment, s)) {
    record_step(kernels_, cb, step, {set_of(step.set), act_.handle(), readback_.handle()});
    if (!step.label.empty()) profiler_.stamp(cb, prof, step.label);
  }
}

}  // namespace rwkvd::engine::vk
