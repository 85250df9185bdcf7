#pragma once
// The RWKV-7 forward as a plan: for one batch shape, the steps of each upload segment (the
// embedding, each layer, the head) with every kernel's arguments, the form each product reads
// and writes, and the barriers between them. A pure function of the device's profile and tuning
// (a Kernels, which decides each product's kernel: Kernels::plan_mm), the model's shapes and
// types, and the batch shape: no device is needed to make one (`rwkvd inspect --plan`), and
// Forward records exactly what it says (record_step). docs/VULKAN.md, "One layer", walks
// through a layer's steps.
#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/model.h"
#include "engine/vk/kernels.h"
#include "engine/vk/weight_layout.h"

namespace rwkvd::engine::vk {

struct ForwardShape {
  uint32_t T = 0;        // tokens in the chunk, all sequences
  uint32_t B = 0;        // sequences
  uint32_t n_out = 0;    // rows that produce an output (embedding rows included)
  uint32_t n_logit = 0;  // the first n_logit of them also go through the head
  // Those rows leave as their argmax's parts (Kernels::argmax), not as logits (greedy picks).
  bool argmax = false;
  uint32_t longest = 0;  // the most tokens of one sequence (0: T)
  uint32_t longest_or_t() const { return longest != 0 ? longest : T; }
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

// The sizes of a forward's buffers and where things lie in them: activations, the batch
// description (meta: per token its sequence, per sequence its slot and tokens, the output rows'
// tokens, then each layer's shift records) and the readback (embeddings, then logits).
struct ForwardGeometry {
  // token_cap: most tokens per chunk (fewer where max_range, the device's storage buffer range,
  // cannot hold their activations; says so on stderr); seq_cap: most sequences per chunk.
  static ForwardGeometry fit(const Rwkv7Hparams& hp, uint32_t token_cap, uint32_t seq_cap,
                             uint64_t max_range, bool say = true);
  // Most output rows (logits or embeddings) of one chunk, the readback buffer's rows: a sequence
  // that wants every token's output gets chunks of at most this many tokens (host-visible memory
  // is slow to allocate: 256 KB of logits a row), others one row each.
  static constexpr uint32_t kOutRows = 128;
  // Words of a layer's shift record (shaders/shift_front.glsl), for products that run a shift of
  // one token in front (Kernels::runs_shift_in_front()).
  static constexpr uint32_t kShiftRecordWords = 12;

  ActLayout act{};
  uint32_t n_embd = 0, n_vocab = 0, n_layer = 0;
  uint32_t token_cap = 0, seq_cap = 0, out_cap = 0;

  uint32_t meta_seq() const { return 4 * token_cap; }
  uint32_t meta_out() const { return 4 * token_cap + 4 * seq_cap; }
  // Layer l's record of its time-mix (ffn false) or channel-mix shift's arguments.
  uint32_t shift_record(uint32_t layer, bool ffn) const {
    return meta_out() + token_cap + (2 * layer + (ffn ? 1 : 0)) * kShiftRecordWords;
  }
  uint64_t meta_bytes() const { return uint64_t{shift_record(n_layer, false)} * 4; }
  uint64_t readback_bytes() const { return uint64_t{out_cap} * (n_embd + n_vocab) * 4; }
  // Where the logit rows land in the readback buffer, or (ForwardShape::argmax) their argmax
  // parts: Kernels::argmax_parts(n_vocab) pairs of words a row.
  uint64_t readback_logits_offset() const { return uint64_t{out_cap} * n_embd * 4; }
};

// A group of products of one weight type, at most four, that run as one dispatch; its weights
// are bound as weights 0..3 of its own descriptor set.
struct ProductGroup {
  std::string label;  // role and weight type, for the profile and the printed plan
  GgmlType type = GgmlType::F32;
  std::vector<const GgufTensor*> tensors;
  std::vector<MmSlot> slots;
};

// Which descriptor set a step binds: the base set (activations, state, meta, vecs), the
// embedding's, a product group's (index: ForwardPlanner::groups()) or layer index's LoRA up
// weights (wkv doing those products).
struct SetRef {
  enum class Kind : uint8_t { kBase, kEmbed, kGroup, kLora };
  Kind kind = Kind::kBase;
  uint32_t index = 0;
};

namespace step {
struct Embed {
  EmbedArgs args;
  GgmlType type;
  uint32_t T;
};
struct Shift {
  ShiftArgs args;
  uint32_t T;
};
struct ToHalf {  // h16.comp: the fp16 form of up to Kernels::kHalfRegions regions
  std::vector<Kernels::HalfRegion> regions;
  uint32_t T;
};
struct ToInt8 {  // q8.comp
  uint32_t K, T, x_off, q_off;
};
struct Products {
  uint32_t group;             // ForwardPlanner::groups() index
  std::vector<MmSlot> slots;  // the group's, with this forward's output forms and shifts
  MmPlan plan;                // Kernels::plan_mm of them
};
struct Wkv {
  WkvArgs args;
  uint32_t n_head, head_size, n_seq, T, longest;
};
struct OutLn {
  OutLnArgs args;
};
struct Argmax {
  uint32_t n, rows, src, dst;
};
struct CopyOut {  // act -> readback: embd rows, then logits (or argmax parts) where any
  uint32_t n_regions;
  std::array<VkBufferCopy, 2> regions;
};
// kCompute: shader writes visible to later shaders; kFull: and transfers (between segments and
// before the copy); kHost: the copies visible to the host.
enum class Barrier : uint8_t { kCompute, kFull, kHost };
}  // namespace step

struct Step {
  std::string label;  // the profiler's name for it; empty for barriers
  SetRef set;
  std::variant<step::Embed, step::Shift, step::ToHalf, step::ToInt8, step::Products, step::Wkv,
               step::OutLn, step::Argmax, step::CopyOut, step::Barrier>
      op;
};

class ForwardPlanner {
 public:
  // kernels: the device's (or a profile's) decisions; weights: where the 1-D parameters lie.
  ForwardPlanner(const Kernels& kernels, const Rwkv7Model& model, const WeightLayout& weights,
                 const ForwardGeometry& geometry);

  // The steps of one upload segment (0: embedding, 1 + l: layer l, n_layer + 1: the head), each
  // segment beginning after a full barrier that its caller records.
  std::vector<Step> segment(uint32_t segment, const ForwardShape& s) const;
  uint32_t n_segments() const { return hp_.n_layer + 2; }

  const std::vector<ProductGroup>& groups() const { return groups_; }
  // Where wkv does the LoRA up products (decode): layer l's w2, a2, g2, v2 bound as weights 0..3
  // of SetRef{kLora, l}; empty where it never does.
  const std::vector<std::array<const GgufTensor*, 4>>& lora_up() const { return lora_up_; }
  // The shift records to write into meta once (offset in words, the record), where some
  // product runs a shift in front.
  std::vector<std::pair<uint32_t, std::array<uint32_t, ForwardGeometry::kShiftRecordWords>>>
  shift_records() const;

  // Kernels::choices() as this model uses them (the LoRA fusion also needs F32 LoRA weights).
  std::vector<std::string> kernel_choices() const;
  const Kernels& kernels() const { return k_; }

  // What Kernels::warm needs for this model: its products' weight types, and the LoRA ranks'
  // sum where wkv will do the LoRA up products (0: it will not).
  struct PipelineNeeds {
    std::vector<GgmlType> types;
    uint32_t lora_ranks = 0;
  };
  static PipelineNeeds pipeline_needs(const Rwkv7Model& model, const Kernels& kernels);

 private:
  struct LayerGroups {             // indices into groups_
    std::vector<uint32_t> first;   // r, k, v and the LoRA down halves: all read the lerps
    std::vector<uint32_t> second;  // LoRA up halves
    uint32_t out = 0, fkey = 0, fval = 0;
    uint32_t lora_half = 0;  // kWkvLoraHalf bits of the F16 LoRA up weights (wkv fusing them)
  };
  void add_layer(uint32_t l);
  std::vector<uint32_t> add_groups(const std::string& role,
                                   const std::vector<std::pair<const GgufTensor*, MmSlot>>& mats);
  void decide_fusions();

  // A segment's parts.
  void embed(const ForwardShape& s, std::vector<Step>& out) const;
  void head(const ForwardShape& s, std::vector<Step>& out) const;
  void time_mix(uint32_t l, const ForwardShape& s, std::vector<Step>& out) const;
  void wkv(uint32_t l, const ForwardShape& s, std::vector<Step>& out) const;
  void channel_mix(uint32_t l, const ForwardShape& s, std::vector<Step>& out) const;

  // A product group's step with these slots (its own by default), planned at T tokens.
  Step products(uint32_t group, uint32_t T) const;
  Step products(uint32_t group, std::vector<MmSlot> slots, uint32_t T) const;
  // The fp16 form of the inputs the planned products read as such (one h16.comp), or nothing.
  void to_half(const std::vector<const Step*>& products, uint32_t T, std::vector<Step>& out) const;
  static MmInput input_of(const Step& products);
  // Layer l's shifts' arguments (also their records for the shifts run in front); the forms they
  // write besides the floats are set where their readers are planned.
  ShiftArgs att_shift(uint32_t l) const;
  ShiftArgs ffn_shift(uint32_t l) const;
  void add_lerp_forms(const std::vector<Step>& first, ShiftArgs& tm) const;
  WkvArgs wkv_args(uint32_t l) const;
  // The ffn key product's slots of layer l at T tokens: with the output form its value product
  // reads (int8 or fp16) where it can write it, and the shift in front (front).
  std::vector<MmSlot> ffn_key_slots(uint32_t l, uint32_t T, MmInput value_input, bool front) const;
  // Which lerp (0..5: xr, xw, xk, xv, xa, xg) a product of the time-mix step reads.
  uint32_t lerp_index(const MmSlot& slot) const;
  bool fuses_lora(const ForwardShape& s, uint32_t l) const;

  const Kernels& k_;
  const Rwkv7Model& model_;
  const WeightLayout& w_;
  ForwardGeometry g_;
  const ActLayout& a_;
  Rwkv7Hparams hp_;
  std::vector<ProductGroup> groups_;
  std::vector<LayerGroups> layers_;
  uint32_t head_ = 0;
  std::vector<std::array<const GgufTensor*, 4>> lora_up_;
  // Decode forwards of one token run each layer's time-mix shift in front of its r/k/v and LoRA
  // down products, and its channel-mix shift in front of its ffn key product, where every
  // layer's can (Kernels::runs_shift_in_front()).
  bool att_in_front_ = false, ffn_in_front_ = false;
};

}  // namespace rwkvd::engine::vk
