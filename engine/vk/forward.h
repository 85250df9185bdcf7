#pragma once
// The RWKV-7 forward as Vulkan work: a fixed plan (activation layout, descriptor sets, grouped
// matrix products) built once per model, and command buffers recorded once per batch shape
// (tokens, sequences, output rows) and replayed. While the weights upload, a shape has n_layer + 2
// command buffers, one per upload segment (embedding, layer l, head), so a forward can start
// while later layers are still uploading; once they are resident, one. Decode uses 8 dispatches per
// layer when r/k/v share a weight type: shift, LoRA down (w1,a1,v1,g1), r/k/v, wkv (with the LoRA
// up products), output, shift, ffn key, ffn value (6 where the products run the shifts in front:
// short rows, Kernels::runs_shift_in_front); long chunks add the LoRA up products and,
// on tensor cores, the fp16 forms of the products' inputs and the sums of split-K products
// (docs/VULKAN.md, "One layer").
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
#include "engine/vk/kernels.h"
#include "engine/vk/profiler.h"
#include "engine/vk/weights.h"

namespace rwkvd::engine::vk {

struct ForwardShape {
  uint32_t T = 0;        // tokens in the chunk, all sequences
  uint32_t B = 0;        // sequences
  uint32_t n_out = 0;    // rows that produce an output (embedding rows included)
  uint32_t n_logit = 0;  // the first n_logit of them also go through the head
  // Those rows leave as their argmax's parts (Kernels::argmax), not as logits (greedy picks).
  bool argmax = false;
  auto operator<=>(const ForwardShape&) const = default;
};

// Float offsets of the activation regions (each [T_cap][width]). The q_ regions hold the int8
// form (shaders/q8.glsl) of the inputs of K-quant decode products: lerps (6, as lerp), y, fx, fh,
// embd (the head's). The h_ regions hold the fp16 form (shaders/h16.comp) of the inputs of
// tensor-core products: lerps (6), y, fx, fh, embd (the head's, at 5-16 logit rows). argmax: the
// logit rows' argmax parts.
struct ActLayout {
  uint32_t x, lerp, save_a, save_f, r, k, v, hw, ha, hv, hg, wl, al, vl, g, vf, y, fx, fh, embd,
      logits, argmax, q_lerp, q_y, q_fx, q_fh, q_embd, h_lerp, h_y, h_fx, h_fh, h_embd;
  uint32_t total;
};

// A Forward's buffers (activations, the state slots, the batch description, the readback),
// which depend only on the device and the model's shape: a caller can have them made on another
// thread while it sets up the weights (2.9B on the H100: ~80 ms, 37 of them a readback of 512
// rows).
struct ForwardBuffers {
  // token_cap: most tokens per chunk (fewer where the device's storage buffer range cannot hold
  // their activations); seq_cap: most sequences per chunk; n_slots: state slots.
  static ForwardBuffers make(Device& dev, const Rwkv7Hparams& hp, uint32_t token_cap,
                             uint32_t seq_cap, uint32_t n_slots);
  // Most output rows (logits or embeddings) of one chunk, the readback buffer's rows: a sequence
  // that wants every token's output gets chunks of at most this many tokens (host-visible memory
  // is slow to allocate: 256 KB of logits a row), others one row each.
  static constexpr uint32_t kOutRows = 128;
  ActLayout layout{};
  uint32_t token_cap = 0, seq_cap = 0, out_cap = 0;
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

  uint32_t token_cap() const { return token_cap_; }
  uint32_t seq_cap() const { return seq_cap_; }
  uint32_t out_cap() const { return out_cap_; }  // output rows a forward may have
  Buffer& meta() { return meta_; }
  // Kernels::choices() as this model uses them (the LoRA fusion also needs F32 LoRA weights).
  std::vector<std::string> kernel_choices() const;
  Buffer& state() { return state_; }
  Buffer& readback() { return readback_; }
  uint64_t scratch_bytes() const { return act_.size() + meta_.size() + readback_.size(); }
  uint32_t meta_seq() const { return 4 * token_cap_; }
  uint32_t meta_out() const { return 4 * token_cap_ + 4 * seq_cap_; }
  // After the batch description: each layer's records of its two shifts' arguments for one
  // token (kShiftRecordWords words, written once), for products that run the shift in front
  // (Kernels::runs_shift_in_front(), shaders/shift_front.glsl); ffn: the channel mix's.
  static constexpr uint32_t kShiftRecordWords = 12;
  uint32_t shift_record(uint32_t layer, bool ffn) const {
    return meta_out() + token_cap_ + (2 * layer + (ffn ? 1 : 0)) * kShiftRecordWords;
  }
  // Where the logit rows land in the readback buffer, or (ForwardShape::argmax) their argmax
  // parts: Kernels::argmax_parts(n_vocab) pairs of words a row.
  VkDeviceSize readback_logits_offset() const { return VkDeviceSize{out_cap_} * hp_.n_embd * 4; }

  // The shape's command buffers, recorded on first use: one per upload segment, so that each
  // can go as soon as its weights are resident, or (whole) one for the forward once all are.
  // Submitting 34 command buffers instead of one cost the host ~0.5 ms per 2.9B token (H100).
  const std::vector<VkCommandBuffer>& commands(const ForwardShape& shape, bool whole);
  // How many times commands() has recorded a shape (reports: a first use costs the recording).
  size_t shapes_recorded() const { return shapes_recorded_; }
  // After the shape's command buffers completed: adds their kernel times to the profile
  // ($RWKVD_VK_PROFILE; nothing otherwise).
  void collect_profile(const ForwardShape& shape, bool whole);
  Profiler& profiler() { return profiler_; }
  // Dispatches recorded for one layer of a decode step (for reports and tests).
  uint32_t dispatches_per_layer() const { return dispatches_per_layer_; }

 private:
  struct MmGroup {
    std::string label;  // for the profile: role and weight type
    GgmlType type;
    VkDescriptorSet set;
    std::vector<MmSlot> slots;
  };
  struct LayerPlan {
    std::vector<MmGroup> first;   // r, k, v and the LoRA down halves: all read the lerps
    std::vector<MmGroup> second;  // LoRA up halves
    std::vector<MmGroup> out, fkey, fval;
    // Where wkv does the LoRA up products (fuse_lora_): their weights w2, a2, g2, v2 bound as
    // weights 0..3 (F32 and F16 mixed, as F16 files hold them), and which are F16
    // (kWkvLoraHalf bits).
    VkDescriptorSet lora_set = VK_NULL_HANDLE;
    uint32_t lora_half = 0;
  };
  struct Recorded {
    std::vector<VkCommandBuffer> cbs;
    std::vector<uint32_t> profile;  // profiler recording of each command buffer
  };
  // The weight types of the model's products, and the LoRA ranks' sum where wkv will do the
  // LoRA up products (every layer's are F32 or F16 and the device's wkv kernel holds them; else
  // 0).
  struct PipelineNeeds {
    std::vector<GgmlType> types;
    uint32_t lora_ranks = 0;
  };
  static PipelineNeeds pipeline_needs(const Rwkv7Model& model, const Kernels& kernels);
  std::vector<MmGroup> group(const std::string& role,
                             const std::vector<std::pair<const GgufTensor*, MmSlot>>& mats);
  void record(VkCommandBuffer cb, uint32_t segment, const ForwardShape& s, uint32_t prof);
  void record_mm(VkCommandBuffer cb, const std::vector<MmGroup>& groups, uint32_t T, uint32_t prof);
  // The arguments of layer l's time-mix (att) and channel-mix (ffn) shifts at T tokens.
  ShiftArgs att_shift(uint32_t l, uint32_t T) const;
  ShiftArgs ffn_shift(uint32_t l, uint32_t T) const;

  // Whether some product of `groups` reads its inputs' int8 form at T tokens (so their producer
  // must write it).
  bool reads_q8(const MmGroup& group, uint32_t T) const;
  bool reads_q8(const std::vector<MmGroup>& groups, uint32_t T) const;
  // The same for the fp16 form (tensor-core products).
  bool reads_h16(const std::vector<MmGroup>& groups, uint32_t T) const;
  // The form a product reads its input in; kFloatOrHalf: floats, or the fp16 form where
  // h16.comp makes it from them.
  enum class InputForm { kInt8, kHalf, kFloat, kFloatOrHalf };
  // Which of the lerps (bit i: lerp i) the first groups read in `form` at T tokens: the shift
  // writes the int8 and fp16 forms itself (so no q8 or h16 dispatch need), and the floats only
  // where some product reads them.
  uint32_t lerp_mask(const std::vector<MmGroup>& groups, uint32_t T, InputForm form) const;
  // Which lerp (0..5: xr, xw, xk, xv, xa, xg) a product of the time-mix step reads.
  uint32_t lerp_index(const MmSlot& slot) const;
  // Writes the fp16 form of the inputs that `groups` read as such at T tokens (h16.comp), then
  // a barrier; nothing where none does.
  void record_half(VkCommandBuffer cb, const std::vector<MmGroup>& groups, uint32_t T,
                   uint32_t prof);
  // Whether the ffn key product writes the int8 form of its output for the ffn value product.
  bool fkey_writes_q8(const LayerPlan& p, uint32_t T) const;
  // Or its fp16 form (both on tensor cores: mcd.comp).
  bool fkey_writes_h16(const LayerPlan& p, uint32_t T) const;

  Device& dev_;
  WeightStore& w_;
  const Rwkv7Model& model_;
  Rwkv7Hparams hp_;
  uint32_t token_cap_, seq_cap_, out_cap_;
  Kernels kernels_;
  Buffer act_, state_, meta_, readback_;
  ActLayout a_{};
  std::unique_ptr<DescriptorSets> sets_;
  VkDescriptorSet base_set_ = VK_NULL_HANDLE, embed_set_ = VK_NULL_HANDLE;
  std::vector<LayerPlan> layers_;
  // Decode forwards (T <= kFusedLoraMaxT, B <= kFusedLoraMaxB) let wkv do the LoRA up products:
  // every layer's are F32 or F16 weights with ranks of whole vec4s and the device runs wkv_sg.
  bool fuse_lora_ = false;
  // Decode forwards of one token run each layer's time-mix shift in front of its r/k/v and LoRA
  // down products, and its channel-mix shift in front of its ffn key product, where every
  // layer's can (Kernels::runs_shift_in_front()).
  bool fuse_att_shift_ = false, fuse_ffn_shift_ = false;
  std::vector<MmGroup> head_;
  Commands cmds_;
  Profiler profiler_;
  std::map<std::pair<ForwardShape, bool>, Recorded> recorded_;  // (shape, whole)
  uint32_t dispatches_per_layer_ = 0;
  size_t shapes_recorded_ = 0;
};

}  // namespace rwkvd::engine::vk
