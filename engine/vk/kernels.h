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
#include "engine/vk/pipelines.h"

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

class Kernels {
 public:
  Kernels(Device& dev, Pipelines& pipes);

  // Creates every pipeline the model's types need now, so that a forward never compiles;
  // lora_ranks: the LoRA ranks' sum where wkv will do the LoRA up products (0: it will not);
  // head: the head's type (the one quantised product that reads its input's floats, not an
  // fp16 form, on the tensor cores: 17 or more logit rows).
  void warm(std::span<const GgmlType> types, uint32_t n_embd, uint32_t head_size,
            uint32_t lora_ranks, GgmlType head);

  // y = W x for 1..4 weights of `type`, T tokens.
  void mm(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, std::span<const MmSlot> slots,
          uint32_t T);
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
  // $RWKVD_VK_SHIFT_IN_FRONT=0 says no, for comparisons.
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
  // T: the tokens of the forward (long chunks get a variant with more tokens per pass).
  void wkv(VkCommandBuffer cb, VkDescriptorSet set, const WkvArgs& a, uint32_t n_head,
           uint32_t head_size, uint32_t n_seq, uint32_t T);
  // Whether wkv() can take kWkvLora for LoRA ranks summing to lora_ranks (the subgroup
  // kernel, ranks its phase L holds; $RWKVD_VK_FUSE_LORA=0 says no, for comparisons).
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
  bool wkv_writes_h16(uint32_t head_size, uint32_t T) const;

  // Makes every earlier shader/transfer write visible to every later shader/transfer access.
  static void barrier(VkCommandBuffer cb);
  // Between two dispatches: shader writes visible to later shaders, nothing else (a barrier
  // that also names transfers costs more on some drivers).
  static void compute_barrier(VkCommandBuffer cb);

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
  // of up to q6_head_int8_max_ rows stays on the int8 kernel, faster there with its device rows.
  bool head_on_coopmat(GgmlType type, uint32_t rows) const;

  uint32_t dispatches() const { return dispatches_; }  // recorded so far (for reports/tests)
  // The variants this device gets ("decode_matvec", "tensor_cores", "wkv_subgroup", ...); what
  // also depends on the model (the LoRA fusion) is the forward's to add.
  std::vector<std::string> choices(uint32_t head_size) const;

 private:
  // wkv_sg.comp (shuffles, 4 invocations per state row) rather than the portable wkv.comp;
  // $RWKVD_VK_WKV_PORTABLE forces the latter.
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
  // mvf.comp's words a lane in flight and rows a team: $RWKVD_VK_MVF_WORDS / _ROWS, else by_shape.
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
  void bind(VkCommandBuffer cb, VkDescriptorSet set, VkPipeline p, const void* pc, uint32_t size);
  Device& dev_;
  Pipelines& pipes_;
  uint32_t wg_ = 64;        // workgroup size of the matmul
  uint32_t row_wg_ = 256;   // workgroup size of the row kernels (embed, shift, out_ln)
  bool row_slices_ = true;  // shift spreads a token's channels over D / row_wg_ workgroups
  bool wkv_portable_ = false;
  uint32_t wkv_lanes_ = 8;  // $RWKVD_VK_WKV_LANES: the fewest invocations per channel of phase L
  uint32_t wkv_group_ = 4;  // $RWKVD_VK_WKV_GROUP: one-token sequences a workgroup takes
  // $RWKVD_VK_WKV_SLICES: workgroups a (head, sequence) of a long chunk splits its state rows
  // over (1: none; 0: wkv_slices() by the grid).
  uint32_t wkv_slices_ = 0;
  bool wkv_fuse_lora_ = true;  // $RWKVD_VK_FUSE_LORA=0: never wkv_fuses_lora() (comparisons)
  bool shift_front_ = true;    // $RWKVD_VK_SHIFT_IN_FRONT=0: never runs_shift_in_front()
  // The longest rows that take a shift in front: every workgroup of the product runs the shift
  // of the whole row before its sums. H100, gen-1 tok/s, shifts apart / in front, alternating in
  // one call, two rounds (docs/PERFORMANCE.md, session 21): 0.1B (768 inputs) both 1738-1752 /
  // 1976-2002; 1.5B (2048) both 668, 669 / 702, 695, the ffn one alone 646, 660 / 663, 643; 2.9B
  // (2560) both 403, 402 / 404, 389, the ffn one alone 413, 414 / 383, 381 (its 640 workgroups'
  // shifts cost more than the dispatch and barrier saved), the att one alone 407, 411 / 409, 398.
  // $RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K and _ATT_ override them.
  uint32_t ffn_front_most_k_ = 2048, att_front_most_k_ = 2048;
  bool wkv_pipelined_ = true;  // $RWKVD_VK_WKV_PIPELINED=0: long chunks on wkv_sg.comp instead
  // $RWKVD_VK_WKV_DIAG (a or b): wkv_long.comp's diagnostic build without phase A or B in its loop;
  // l: wkv_sg.comp's with its LoRA up phase but not that phase's weight loads (timing only).
  std::string wkv_diag_;
  // $RWKVD_VK_MVQ_DIAG (a, c, d, e or q): mvq.comp's diagnostic builds (vk_kernel_bench only).
  std::string mvq_diag_;
  // From wkv_long_t_ tokens: invocations per channel and tokens per block of the long variant.
  uint32_t wkv_long_t_ = 33, wkv_long_lanes_ = 16, wkv_long_block_ = 16;
  uint32_t dispatches_ = 0;
  uint32_t max_row_groups_ = UINT32_MAX;  // most workgroups along the rows of a product
  // The decode matvec (mv.comp): used for T <= mv_max_t_ when subgroups exist; its workgroup
  // size, rows per subgroup and most tokens per workgroup ($RWKVD_VK_MV_MAX_T, _WG, _ROWS,
  // _TT_MAX override them for tuning).
  uint32_t mv_max_t_ = 0, mv_rows_ = 0;    // rows 0: mv_rows() decides
  uint32_t mv_wg_one_ = 64, mv_wg_ = 128;  // workgroup size for one token / several (mv_wg())
  uint32_t mvq_wg_ = 64;                   // mvq.comp's ($RWKVD_VK_MVQ_WG; default mv_wg_one_)
  uint32_t mv_tt_max_ = 4;
  // mvf.comp ($RWKVD_VK_MVF=0: mv.comp instead): workgroup and subgroups a team (0: mvf_key()
  // picks by the shape; $RWKVD_VK_MVF_WG, _KS), 16-byte words a lane in flight and rows a team
  // ($RWKVD_VK_MVF_WORDS, _ROWS; 0: mvf_words(), mvf_rows() by the shape).
  bool mvf_ = false;
  uint32_t mvf_wg_ = 0, mvf_words_ = 0, mvf_rows_ = 0, mvf_ks_ = 0;  // 0: by the shape
  // mvq.comp's pieces in flight per lane ($RWKVD_VK_MVQ_PIECES).
  uint32_t mvq_pieces_ = 2;
  uint32_t mvq_ksplit_ = 0;  // $RWKVD_VK_MVQ_KSPLIT: 1 never splits; 0 mvq_ksplit()'s rule
  // The tiled product (mt.comp) for T > mv_max_t_ and T >= mt_min_t_ ($RWKVD_VK_MT_MIN_T).
  uint32_t mt_min_t_ = 9;
  bool coopmat_ = false;     // the device has mc.comp's matrices (DeviceFeatures::coopmat)
  bool half_inputs_ = true;  // $RWKVD_VK_HALF_INPUTS=0: mc.comp reads floats (comparison only)
  bool f16_split_ = true;    // $RWKVD_VK_F16_SPLIT=0: F16 weights on mt.comp (comparison only)
  // mc.comp takes 32-token tiles when 64-token ones would make fewer workgroups than this
  // ($RWKVD_VK_MC_SMALL_GRID; 0 never, a huge value always).
  uint32_t mc_small_grid_ = 256;
  // mc.comp's rows per workgroup: $RWKVD_VK_MC_ROWS (64 or 128) forces one; 0: mc_rows() picks.
  uint32_t mc_rows_ = 0;
  // mc.comp's tokens per tile: $RWKVD_VK_MC_TOKENS (32 or 64) forces one; 0: by grid size.
  uint32_t mc_tokens_ = 0;
  // mc_split(): $RWKVD_VK_MC_SPLIT 1 never splits, 2, 4 or 8 splits up to that wherever the
  // scratch and K allow; 0 (default) splits products of few row tiles (kMcSplitTiles).
  uint32_t mc_split_ = 0;
  // mcd.comp for mcd_min_t_ .. mcd_max_t_ tokens ($RWKVD_VK_MCD_MIN_T, _MAX_T; max 0: never), with
  // mcd_sg_ subgroups a workgroup ($RWKVD_VK_MCD_SG, 1 .. 8). Up to 4 tokens stay on the int8
  // products, which cost less there (H100, us at 1 / 2 / 4 tokens, int8 -> mcd.comp: Q4_K 2560 ->
  // 10240 12.1 / 16.3 / 22.3 -> ~22 at any count; 10240 -> 2560 12.8 / 18.3 / 24.9 -> ~33; 2560
  // -> 2560 6.3 / 8.4 / 10.9 -> ~10.6; docs/PERFORMANCE.md, session 10).
  uint32_t mcd_min_t_ = 5, mcd_max_t_ = 16, mcd_sg_ = 8;
  uint32_t mcd_split_ = 0;  // $RWKVD_VK_MCD_SPLIT: 1 never splits, 2 or 4 forces; 0 mcd_split()
  // A Q6_K head of up to this many rows on the int8 kernel even where few_on_coopmat() holds
  // ($RWKVD_VK_Q6_HEAD_INT8_MAX; 0: the head follows the other products). H200, 65536 x 2560 at
  // 8 rows: 175 us against 214 on tensor cores (device_layout.h's rows).
  uint32_t q6_head_int8_max_ = 8;
  // One token's int8 products of at least this many rows (heads: the vocabulary) take 4 rows a
  // subgroup, the others one ($RWKVD_VK_MVQ_MANY_ROWS; mvq_rows()).
  uint32_t mvq_many_rows_ = 32768;
};

// Shader-name suffix of a weight type ("q4_k").
std::string weight_type_suffix(GgmlType t);

}  // namespace rwkvd::engine::vk
