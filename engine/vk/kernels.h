#pragma once
// Recording of each kernel family: the C++ mirror of every shader's push constants and the
// dispatch geometry. Callers own buffers and descriptor sets; the forward (forward.cpp) and the
// kernel tests both record through these.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/ggml_type.h"
#include "engine/vk/device_profile.h"
#include "engine/vk/pipelines.h"
#include "engine/vk/tuning.h"

namespace rwkvd::engine::vk {

enum class MmMode : uint32_t { kStore = 0, kAdd = 1, kTanh = 2, kSigmoid = 3, kReluSq = 4 };

// MmSlot::q8_off when the input has no int8 form.
constexpr uint32_t kNoQ8 = UINT32_MAX;

// One matrix of a grouped product; its weight is array element i of the set's weight binding.
struct MmSlot {
  uint32_t K = 0, N = 0;          // ne[0] (inputs), ne[1] (outputs)
  uint32_t x_off = 0, y_off = 0;  // act float offsets of x [T][K] and y [T][N]
  MmMode mode = MmMode::kStore;
  uint32_t row_bytes = 0;
  // act float offset of x's int8 form (shaders/q8.glsl: T rows of q8_row_floats(K)), where the
  // producer wrote one; mm() reads it instead of x where reads_q8() says so.
  uint32_t q8_off = kNoQ8;
  // act float offset where mm() also writes y's int8 form (needs writes_q8()).
  uint32_t yq_off = kNoQ8;
  // act float offset where mm() also writes y's fp16 form (needs writes_h16()).
  uint32_t yh_off = kNoQ8;
  // With yh_off: nothing reads y's floats, so the product may leave them unwritten (mc.comp does:
  // the ffn key product's 10240 outputs a token, which the ffn value product reads as fp16).
  bool y_half_only = false;
  // act float offset of x's fp16 form (shaders/h16.comp: T rows of K / 2 words), where the
  // forward wrote one; on tensor cores (uses_coopmat()) mm() reads it instead of x.
  uint32_t h16_off = kNoQ8;
  // F32 weights that may run on the fp16 tensor cores with many tokens (mc.comp's precision):
  // the LoRA products of a model whose large products are quantised and run there anyway.
  bool half_ok = false;
  // Scratch for split-K partial sums on tensor cores (Kernels::mc_split), read from the first
  // slot of a group: act float offset and floats per token there (kNoQ8: no split).
  uint32_t part_off = kNoQ8, part_width = 0;
  // A shift of one token in front of the product (runs_shift_in_front()): the meta word offset of
  // its arguments' record (Forward writes them; kNoQ8: none), the slot's lerp (a vecs offset),
  // and whether this dispatch's first workgroup does the shift's stores (one product of the
  // shift's step does). x_off and q8_off are then unused.
  struct ShiftInFront {
    uint32_t rec = kNoQ8, lerp = 0;
    bool stores = false;
  };
  ShiftInFront front = {};
};

// Floats of one row of K inputs in int8 form (shaders/q8.glsl).
constexpr uint32_t q8_row_floats(uint32_t K) {
  return K / 4 + K / 8;
}

struct ShiftArgs {
  uint32_t D, n_lerp, x_off, out_off, out_stride, save_off, norm_w, norm_b, lerp_off, state_row,
      slot_floats, commit, commit_src, commit_row, meta_seq;
  float eps;
  // Bit i: output i's int8 form too (shaders/q8.glsl), T rows at q8_off + i * q8_stride; for
  // products that reads_q8(). Needs D and the workgroup to be multiples of 16.
  uint32_t q8_mask = 0, q8_off = 0, q8_stride = 0;
  // Bit i: output i's fp16 form too (shaders/h16.comp's), T rows of D / 2 words at h16_off +
  // i * h16_stride; for tensor-core products that reads_h16(). Needs D even.
  uint32_t h16_mask = 0, h16_off = 0, h16_stride = 0;
  // Bit i: output i's float form is not written (every product that takes it reads its int8 or
  // fp16 form from this shift): at 854 tokens 2.9B's att shift writes 52 MB less.
  uint32_t f32_skip = 0;
};

struct WkvArgs {
  uint32_t D, r_off, k_off, v_off, wl_off, al_off, vl_off, g_off, vf_off, y_off;
  uint32_t w0, a0, v0, k_k, k_a, r_k, lnx_w, lnx_b;
  uint32_t state_base, slot_floats;
  // kWkvLayer0: layer 0 (no value residual); kWkvLora: wkv_sg.comp does the LoRA up products
  // (w2, a2, g2, v2 bound as weights 0..3, F32 or F16: kWkvLoraHalf) from the down outputs at
  // hw_off.. itself, see Kernels::wkv_fuses_lora. Kernels::wkv() sets the rest (its sequence
  // groups).
  uint32_t flags, meta_seq;
  uint32_t n_seq = 0;  // Kernels::wkv() sets it
  uint32_t hw_off = 0, ha_off = 0, hv_off = 0, hg_off = 0;
  uint32_t rank_w = 0, rank_a = 0, rank_v = 0, rank_g = 0;
  // y's int8 form (shaders/q8.glsl) too, T rows at this act offset; see wkv_writes_q8().
  uint32_t y_q8 = kNoQ8;
};
// kWkvYHalf: y_q8 names y's fp16 form (h16.comp's), which wkv writes instead of y's floats, for
// an output product on tensor cores (see wkv_writes_h16()).
// kWkvLoraHalf << i (with kWkvLora): LoRA up weight i (w2, a2, g2, v2) is F16, not F32.
constexpr uint32_t kWkvLayer0 = 1, kWkvLora = 2, kWkvYHalf = 4, kWkvLoraHalf = 1u << 24;

struct EmbedArgs {
  uint32_t D, row_bytes, x_off, norm_w, norm_b;
  float eps;
};

struct OutLnArgs {
  uint32_t D, x_off, embd_off, norm_w, norm_b, n_out, n_seq, meta_seq, meta_out, slot_floats,
      commit_src, commit_row;
  float eps;
  // The embd rows' int8 form too (shaders/q8.glsl), n_out rows at this act offset, for a head
  // that reads it (out_ln_writes_q8()).
  uint32_t q8_off = kNoQ8;
};

// The push constants of every product kernel (shaders/product.glsl).
struct MmPush {
  uint32_t K[4], N[4], x_off[4], y_off[4], mode[4], row_bytes[4], yq_off[4];
  uint32_t T;
  uint32_t ksplit = 1, part_off = 0, part_width = 0;  // split-K parts, or a shift in front
};

// The form a product reads its inputs in: floats, their int8 form (shaders/q8.glsl), their fp16
// form (shaders/h16.comp), or the floats split into two fp16 halves (F16 weights on tensor cores).
enum class MmInput : uint8_t { kFloat, kInt8, kHalf, kHalves };
const char* mm_input_name(MmInput input);

// How a group of products runs: Kernels::plan_mm() decides it from the slots, record_mm()
// records it. The one place where a product's kernel is chosen: the forward's plan asks it which
// form each product reads, so that producers write just those forms.
struct MmPlan {
  MmInput input = MmInput::kFloat;
  bool writes_q8 = false;   // also its output's int8 form (a slot's yq_off)
  bool writes_h16 = false;  // also its output's fp16 form (a slot's yh_off)
  bool shift_in_front = false;
  Pipelines::Key key;
  uint32_t x = 0, y = 0, z = 0;  // the grid
  // Split-K parts (z counts them): mc_sum.comp adds their partial sums after a barrier.
  uint32_t split = 1;
  uint32_t sum_x = 0, sum_y = 0;  // mc_sum.comp's grid
  MmPush pc{};
};

// One dispatch as Kernels recorded it: its pipeline and grid, or a barrier (empty key name).
struct Dispatch {
  Pipelines::Key key;
  uint32_t x = 0, y = 0, z = 0;
};

class Kernels {
 public:
  // The device's profile and tuning (Device::tuning()).
  Kernels(Device& dev, Pipelines& pipes);
  // Another tuning; with pipes null, a plan-only Kernels: nothing is recorded on a command
  // buffer (pass null handles), every dispatch and barrier goes to dispatch_log(), so which
  // kernel a product takes on a device profile can be asked without a device.
  Kernels(const DeviceProfile& profile, const Tuning& tuning, Pipelines* pipes);

  // Creates every pipeline the model's types need now, so that a forward never compiles;
  // lora_ranks: the LoRA ranks' sum where wkv will do the LoRA up products (0: it will not);
  // head: the head's type (the one quantised product that reads its input's floats, not an
  // fp16 form, on the tensor cores: 17 or more logit rows).
  void warm(std::span<const GgmlType> types, uint32_t n_embd, uint32_t head_size,
            uint32_t lora_ranks, GgmlType head);

  // y = W x for 1..4 weights of `type`, T tokens: record_mm(plan_mm()).
  void mm(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, std::span<const MmSlot> slots,
          uint32_t T);
  // The kernel, input form and grid of those products; throws EngineError where the slots ask
  // for what no kernel here does (an output form, a shift in front).
  MmPlan plan_mm(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const;
  void record_mm(VkCommandBuffer cb, VkDescriptorSet set, const MmPlan& plan);
  // Whether mm() reads the int8 form of T tokens' inputs to products of `type` (when every slot
  // has one): decode products of Q4_K/Q5_K weights where the device has integer dot products
  // (mvq.comp). Producers write the form only then.
  bool reads_q8(GgmlType type, uint32_t T) const;
  // Whether mm() can also write the int8 form of its output (MmSlot::yq_off) for a product of
  // `type` with N outputs at T tokens, reading int8 inputs: saves the consumer a quantize_q8().
  bool writes_q8(GgmlType type, uint32_t K, uint32_t N, uint32_t T) const;
  // Whether mm() can run the shift of one token in front of these products of `type`
  // (MmSlot::front): their inputs' int8 form (mvq.comp, also writing its output's where yq_off
  // says) or floats (mvf.comp), rows short enough; the shift's dispatch and barrier are saved.
  // Tuning::shift_in_front false says no, for comparisons.
  bool runs_shift_in_front(GgmlType type, std::span<const MmSlot> slots) const;
  // mvq.comp's split of K for rows of K inputs (pc.ksplit subgroups a row group): by the shape
  // alone, so that a token's sums run in the same order for any number of tokens.
  uint32_t mvq_ksplit(uint32_t K) const;
  // mvq.comp's rows per subgroup for products of `tokens` tokens and n rows (0: rows that the
  // rule for many rows does not reach: the int8-output and shift-in-front variants).
  uint32_t mvq_rows(uint32_t tokens, uint32_t n = 0) const;
  // The int8 form of x [T][K] at act offset x_off, to q_off (shaders/q8.comp); K % 32 == 0.
  void quantize_q8(VkCommandBuffer cb, VkDescriptorSet set, uint32_t K, uint32_t T, uint32_t x_off,
                   uint32_t q_off);
  // Whether mm() runs these products on tensor cores reading their inputs' fp16 form (every
  // slot has an h16_off): the caller must have written it (to_half()).
  bool reads_h16(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const;
  // Whether mm() can also write the fp16 form of its output (MmSlot::yh_off) for these products
  // at T tokens, reading fp16 inputs (mcd.comp, or mc.comp where K is not split): saves the
  // consumer a to_half().
  bool writes_h16(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const;
  // The fp16 form (shaders/h16.comp) of up to kHalfRegions activation regions at T tokens.
  struct HalfRegion {
    uint32_t K, x_off, h_off;  // K % 8 == 0
  };
  static constexpr size_t kHalfRegions = 8;
  void to_half(VkCommandBuffer cb, VkDescriptorSet set, uint32_t T,
               std::span<const HalfRegion> regions);
  void embed(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, const EmbedArgs& a,
             uint32_t T);
  void shift(VkCommandBuffer cb, VkDescriptorSet set, const ShiftArgs& a, uint32_t T);
  // T: the tokens of the forward; longest: the most of one sequence (0: T). A chunk whose
  // longest sequence has Tuning::wkv_long_t tokens or more takes the long-chunk kernels (phases
  // pipelined over each sequence's tokens); many sequences of a token or a few do not.
  void wkv(VkCommandBuffer cb, VkDescriptorSet set, const WkvArgs& a, uint32_t n_head,
           uint32_t head_size, uint32_t n_seq, uint32_t T, uint32_t longest = 0);
  // Whether wkv() can take kWkvLora for LoRA ranks summing to lora_ranks (the subgroup
  // kernel, ranks its phase L holds; Tuning::fuse_lora false says no, for comparisons).
  bool wkv_fuses_lora(uint32_t head_size, uint32_t lora_ranks) const;
  void out_ln(VkCommandBuffer cb, VkDescriptorSet set, const OutLnArgs& a);
  // Whether out_ln() can write the int8 form of rows of D (OutLnArgs::q8_off): its subgroup
  // variant, whole runs of 16.
  bool out_ln_writes_q8(uint32_t D) const;
  // The largest of each of `rows` rows of n floats at act offset src (argmax.comp): each row
  // as argmax_parts(n) (value bits, index) pairs at act offset dst, row after row, for
  // argmax_of_parts() to merge on the host.
  void argmax(VkCommandBuffer cb, VkDescriptorSet set, uint32_t n, uint32_t rows, uint32_t src,
              uint32_t dst);
  static uint32_t argmax_parts(uint32_t n);
  // engine::argmax of the row whose parts argmax() wrote (2 * argmax_parts(n) words).
  // `best` (where given): the largest value, -inf where every part held only NaN.
  static int32_t argmax_of_parts(const uint32_t* pairs, uint32_t parts, float* best = nullptr);
  // Whether wkv() can write y's int8 form (WkvArgs::y_q8): the subgroup kernel, head sizes of
  // whole 16-element runs.
  bool wkv_writes_q8(uint32_t head_size) const;
  // Whether wkv() of T tokens can take kWkvYHalf (the subgroup kernels: wkv_sg.comp, or for a
  // long chunk wkv_out.comp where subgroups pair channels).
  bool wkv_writes_h16(uint32_t head_size, uint32_t longest) const;

  // Makes every earlier shader/transfer write visible to every later shader/transfer access.
  static void barrier(VkCommandBuffer cb);
  // The same, logged by a plan-only Kernels; then the host's barrier (shader and transfer
  // writes visible to host reads), and a copy between buffers.
  void full_barrier(VkCommandBuffer cb);
  void host_barrier(VkCommandBuffer cb);
  void copy(VkCommandBuffer cb, VkBuffer src, VkBuffer dst, std::span<const VkBufferCopy> regions);
  // Between two dispatches: shader writes visible to later shaders, nothing else (a barrier
  // that also names transfers costs more on some drivers; Tuning::full_barriers takes that).
  void compute_barrier(VkCommandBuffer cb);

  // Whether mm() runs T tokens of `type` with inputs of K on tensor cores (mc.comp, or mcd.comp
  // for a few tokens: fp16 operands, see tensor_core.glsl) rather than in fp32 or on int8
  // inputs; F32 weights only with half_ok (MmSlot::half_ok) and many tokens.
  bool uses_coopmat(GgmlType type, uint32_t K, uint32_t T, bool half_ok = false) const;
  // Whether its tensor-core products take the inputs as two fp16 halves (F16 weights: float32's
  // precision, see mc.comp MC_SPLIT) rather than one.
  bool splits_inputs(GgmlType type) const;
  // Whether products of T tokens of quantised weights take mcd.comp (tensor cores for a few
  // tokens) where they have their inputs' fp16 form.
  bool few_on_coopmat(uint32_t T) const;
  // Whether a head of `rows` logit rows takes mcd.comp: few_on_coopmat, except that a Q6_K head
  // of up to Tuning::q6_head_int8_max rows stays on the int8 kernel, faster there with its device
  // rows.
  bool head_on_coopmat(GgmlType type, uint32_t rows) const;

  uint32_t dispatches() const { return dispatches_; }  // recorded so far (for reports/tests)
  // A plan-only copy (same profile and tuning, no pipelines, an empty log).
  Kernels plan_only() const;
  // A plan-only Kernels' dispatches and barriers so far, and forgetting them.
  const std::vector<Dispatch>& dispatch_log() const { return log_; }
  void clear_dispatch_log() { log_.clear(); }
  const Tuning& tuning() const { return t_; }  // as fitted to the device
  const DeviceProfile& profile() const { return prof_; }
  // The variants this device gets ("tuning=nvidia-hopper": its class's table, "decode_matvec",
  // "tensor_cores", "wkv_subgroup", ...); what also depends on the model (the LoRA fusion) is the
  // forward's to add.
  std::vector<std::string> choices(uint32_t head_size) const;

 private:
  // wkv_sg.comp (shuffles, 4 invocations per state row) rather than the portable wkv.comp;
  // Tuning::wkv_portable forces the latter.
  bool wkv_sg(uint32_t head_size) const;
  // wkv_sg's LoRA up phase for these ranks: invocations per channel (0: none fits), weight
  // vec4 per invocation, tokens staged at once.
  struct WkvLora {
    uint32_t lanes = 0, loads = 0, staged = 1;
  };
  WkvLora wkv_lora(uint32_t head_size, uint32_t lora_ranks) const;
  // wkv_sg.comp's pipeline for a forward of T tokens, with or without the LoRA up phase, with
  // workgroups of one sequence or (grouped) of a group of one-token sequences.
  Pipelines::Key wkv_key(uint32_t head_size, uint32_t T, bool lora, uint32_t lora_ranks,
                         bool grouped = false) const;
  // wkv_long.comp's pipeline for long chunks (the pipelined phases A and B), if this device
  // runs it; else an empty name.
  Pipelines::Key wkv_long_key(uint32_t head_size) const;
  // Row slices for a long chunk's wkv of n_head x n_seq (head, sequence) workgroups.
  uint32_t wkv_slices(uint32_t n_head, uint32_t head_size, uint32_t n_seq) const;
  uint32_t mv_rows() const;  // mv.comp's rows a subgroup
  uint32_t mv_wg(uint32_t tokens) const;
  // Workgroups along a product's rows, `rows` a workgroup: enough for max_n, within the device's
  // grid and max_row_groups_ (the row kernels' workgroups loop over the rest).
  uint32_t row_groups(uint32_t max_n, uint32_t rows) const;
  // mv.comp's pipeline for a type, tokens a workgroup and rows a subgroup.
  Pipelines::Key mv_key(GgmlType type, uint32_t tokens, uint32_t rows) const;
  // Whether mvf.comp (float weights at one token) takes these products, and its pipeline for
  // products of at most max_n rows and `weights` weights a slot.
  bool takes_mvf(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const;
  // K: the longest row's inputs.
  Pipelines::Key mvf_key(GgmlType type, uint32_t max_n, uint64_t weights, uint32_t K) const;
  uint32_t few_rows_team(GgmlType type, uint32_t K) const;
  // mvf.comp's words a lane in flight and rows a team: Tuning::mvf_words / _rows, else by_shape.
  uint32_t mvf_words(uint32_t by_shape) const;
  uint32_t mvf_rows(uint32_t by_shape) const;
  // mvq.comp's for products of n rows (mvq_rows()); qout: the variant that also writes its
  // output's int8 form (workgroups of 16 rows).
  Pipelines::Key mvq_key(GgmlType type, uint32_t tokens, bool qout = false, uint32_t n = 0) const;
  // The quads a lane of shift.comp and out_ln.comp holds of a row of D, and their pipelines;
  // out_ln.comp's subgroup variant (reductions and the int8 form's shuffles) where it runs.
  uint32_t row_quads(uint32_t D) const;
  Pipelines::Key shift_key(uint32_t D) const;
  bool out_ln_sg() const;
  Pipelines::Key out_ln_key(uint32_t D) const;
  uint32_t mvq_qout_wg(uint32_t tokens) const;
  Pipelines::Key mvq_ln_key(GgmlType type, uint32_t K, bool qout) const;
  Pipelines::Key mvf_ln_key(GgmlType type, uint32_t K) const;
  // mc.comp's pipeline for a tile of `rows` (64 or 128) rows by `tokens` (64 or 32) tokens.
  std::string mc_name(GgmlType type, uint32_t rows, uint32_t tokens) const;
  // Its pipeline; x16: reading the inputs' fp16 form.
  Pipelines::Key mc_key(GgmlType type, uint32_t rows, uint32_t tokens, bool x16) const;
  // Whether mcd.comp (tensor cores for a few tokens, reading fp16 inputs) runs at all here.
  bool mcd_on() const;
  // Workgroups that share each mcd.comp tile, each over a part of K (1, 2 or 4): long rows with
  // few outputs (the ffn value product), by the shape alone; the parts' partial sums go to the
  // slots' scratch (MmSlot::part_off) and mc_sum.comp adds them.
  uint32_t mcd_split(std::span<const MmSlot> slots) const;
  Pipelines::Key mcd_key(GgmlType type) const;
  // Workgroups that share each mc.comp tile, each over a part of K (1 to 8): products with
  // few row tiles (the more parts the longer their rows), where slots' scratch
  // (MmSlot::part_off) holds the partial sums. Depends on the product's shape, not on T, so a
  // token's sums run in the same order in any chunk.
  uint32_t mc_split(std::span<const MmSlot> slots) const;
  // mc.comp's tile height for a product of up to max_n rows, T tokens, n_slots weights, K in
  // split parts.
  uint32_t mc_rows(GgmlType type, uint32_t max_n, uint32_t T, uint32_t n_slots,
                   uint32_t split) const;
  // The shader's _sg variant (subgroup reductions) where the device has subgroup arithmetic.
  std::string subgroup_variant(const std::string& shader) const;
  // warm()'s parts: the pipelines of one weight type's products, then the rest.
  void warm_tensor_cores(GgmlType t, GgmlType head, std::vector<Pipelines::Key>& keys) const;
  void warm_matvec(GgmlType t, uint32_t n_embd, std::vector<Pipelines::Key>& keys) const;
  void warm_rows_and_wkv(uint32_t n_embd, uint32_t head_size, uint32_t lora_ranks,
                         std::vector<Pipelines::Key>& keys) const;
  // plan_mm()'s parts: its checks and push constants, then one per kernel it can take.
  struct MmCall;
  void mm_prepare(MmCall& c) const;
  void mm_parts(MmCall& c, const Pipelines::Key& key, uint32_t split, uint32_t gx,
                uint32_t gy) const;
  void mm_few_on_coopmat(MmCall& c, bool halves) const;
  void mm_float_matvec(MmCall& c) const;
  void mm_matvec(MmCall& c) const;
  void mm_coopmat(MmCall& c) const;
  void mm_tiled(MmCall& c) const;
  void mm_portable(MmCall& c) const;
  // Binds the pipeline of `key` with its descriptor set and push constants, and dispatch()
  // records its grid; without pipelines (a plan-only Kernels) both only log (dispatch_log()).
  void bind(VkCommandBuffer cb, VkDescriptorSet set, const Pipelines::Key& key, const void* pc,
            uint32_t size);
  void dispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z);
  // Its normalisation to this device (kernels.cpp): values that depend on its limits and
  // features.
  void fit_tuning();
  DeviceProfile prof_;
  Tuning t_;
  Pipelines* pipes_;
  uint32_t wg_ = 64;       // workgroup size of the portable product (mm.comp)
  uint32_t row_wg_ = 256;  // workgroup size of the row kernels (embed, shift, out_ln)
  bool coopmat_ = false;   // the device has mc.comp's matrices, with shuffles for their inputs
  bool khr_ = false;       // through VK_KHR_cooperative_matrix (mc.comp MC_KHR)
  uint32_t dispatches_ = 0;
  std::vector<Dispatch> log_;
};

// Shader-name suffix of a weight type ("q4_k").
std::string weight_type_suffix(GgmlType t);

}  // namespace rwkvd::engine::vk
