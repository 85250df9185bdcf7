#include "engine/vk/kernels.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/error.h"

namespace rwkvd::engine::vk {
namespace {

constexpr uint32_t kTokenTile = 8;                    // mm.comp TT: tokens per workgroup
constexpr uint32_t kTileRows = 64, kTileTokens = 64;  // mt.comp and mc.comp BM, BN
constexpr uint32_t kWkvBlock = 8;  // wkv_sg.comp TB: tokens per block (a multiple of 4)
// Row slices of wkv_long.comp: at most 8 (8 rows, 32 invocations of phase B, for head size 64),
// and at least 4 rows each (the rule's own limit: Tuning::wkv_slices_most).
constexpr uint32_t kWkvMostSlices = 8, kWkvSliceRows = 4;
constexpr uint32_t kWkvRowLanes = 4;  // wkv_core.glsl P: invocations per state row in phase B
// wkv_sg.comp LL: weight vec4 a lane of its LoRA up phase holds at most (registers).
constexpr uint32_t kWkvLoraLoadsMax = 40;
constexpr uint32_t kQ8Wg = 64;                                    // q8.comp workgroup
constexpr uint32_t kArgmaxWg = 256, kArgmaxPart = 4 * kArgmaxWg;  // argmax.comp: one pass a part
constexpr uint32_t kH16Wg = 64;                                   // h16.comp workgroup
constexpr uint32_t kMcStepK = 64;       // mc.comp's K per step (BK), mcd.comp's too
constexpr uint32_t kMcPieceK = 32;      // mc.comp's float rows: K a multiple of its pieces
constexpr uint32_t kModeHalfOnly = 16;  // product.glsl: MmSlot::y_half_only
constexpr uint32_t kMcSumWg = 256;      // mc_sum.comp workgroup
constexpr uint32_t kMcdRows = 16, kMcdTokens = 16;  // mcd.comp BM, BT
// mc_split()'s most parts (the scratch in the logits region holds 8 rows a token).
constexpr uint32_t kMcSplitMost = 8;

static_assert(sizeof(MmPush) <= kPushConstantBytes);
static_assert(sizeof(ShiftArgs) <= kPushConstantBytes);
static_assert(sizeof(WkvArgs) <= kPushConstantBytes);
static_assert(sizeof(OutLnArgs) <= kPushConstantBytes);

// The push constants of products that run a shift in front (shaders/shift_front.glsl): its
// record, whether the dispatch does its stores, and each slot's lerp where x_off was.
void set_front(std::span<const MmSlot> slots, MmPush& pc) {
  pc.part_off = slots[0].front.rec;
  pc.part_width = slots[0].front.stores ? 1 : 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].front.rec != slots[0].front.rec) {
      throw EngineError("vk mm: a dispatch's products run one shift in front");
    }
    pc.x_off[i] = slots[i].front.lerp;
  }
}

uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

// mv.comp's tokens per workgroup for T tokens: the smallest of 1, 2, 4, 8 that holds them.
// Capped at `cap` (Kernels::mv_tt_max_).
uint32_t mv_tokens(uint32_t T, uint32_t cap) {
  const uint32_t tt = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : 8;
  return std::min(tt, cap);
}

// mv.comp's staged chunk of K: one 32-weight piece per lane of a subgroup.
uint32_t mv_chunk(const DeviceProfile& dev) {
  return 32 * dev.features.subgroup_size;
}

// Bytes of shared memory mv.comp stages for tt tokens (its xs array).
uint32_t mv_shared_bytes(const DeviceProfile& dev, uint32_t tt) {
  return tt * (mv_chunk(dev) + mv_chunk(dev) / 8) * 4;
}

bool is_float_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

// The weight types mvq.comp reads (the K-quants of Q4_K_M / Q5_K_M files).
bool has_int8_product(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

// wkv_sg.comp's shared memory for these constants (see its arrays; red4 of common.glsl too).
uint32_t wkv_shared_bytes(uint32_t ns, uint32_t lanes, uint32_t block, uint32_t loads,
                          uint32_t staged = 1) {
  const uint32_t lora = loads > 0 ? 16 * block * ns + 16 * staged * lanes * loads : 8;
  return 28 * block * ns + 4 * block + 2 * ns * lanes + lora + 16 * 256;
}

struct H16Push {
  uint32_t T;
  uint32_t K[Kernels::kHalfRegions], x_off[Kernels::kHalfRegions], h_off[Kernels::kHalfRegions];
};

struct Q8Push {
  uint32_t K, T, x_off, q_off;
};

}  // namespace

std::string weight_type_suffix(GgmlType t) {
  std::string s(ggml_traits(t).name);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Kernels::Kernels(Device& dev, Pipelines& pipes) : Kernels(dev.profile(), dev.tuning(), &pipes) {}

Kernels::Kernels(const DeviceProfile& profile, const Tuning& tuning, Pipelines* pipes)
    : prof_(profile), t_(tuning), pipes_(pipes) {
  check_tuning(t_, "vulkan tuning");
  prof_.features = allowed_features(prof_.features, t_);
  fit_tuning();
}

// The tuning's values as this device can take them: workgroups within its limits and no smaller
// than a subgroup, "0: none" as the largest count, the subgroup kernels' values only where
// subgroups exist.
void Kernels::fit_tuning() {
  const DeviceFeatures& f = prof_.features;
  const uint32_t sg = f.subgroup_size;
  wg_ = std::min(t_.mm_wg, prof_.max_workgroup_size);
  row_wg_ = std::min(t_.row_wg, prof_.max_workgroup_size);
  if (t_.max_row_groups == 0) t_.max_row_groups = UINT32_MAX;
  if (t_.wkv_long_t == 0) t_.wkv_long_t = UINT32_MAX;
  // (Their producers, the shifts, write the fp16 and int8 forms with shuffles.)
  const bool nv = f.coopmat && f.subgroup_shuffle;
  khr_ = f.khr_m != 0 && f.subgroup_shuffle && (!nv || t_.mc_khr);
  coopmat_ = nv || khr_;
  if (!f.subgroup_arith) {
    t_.mv_max_t = 0;
    t_.mvf = false;
    return;
  }
  t_.mv_wg_one = std::max(sg, t_.mv_wg_one);
  t_.mv_wg = std::max(sg, t_.mv_wg);
  t_.mvq_wg = std::max(sg, t_.mvq_wg);
  if (t_.mvf_wg > 0) t_.mvf_wg = std::max(sg, t_.mvf_wg);
  // No more tokens a workgroup than the staged inputs' shared memory allows.
  while (t_.mv_tt_max > 1 && mv_shared_bytes(prof_, t_.mv_tt_max) > prof_.max_shared_memory) {
    t_.mv_tt_max /= 2;
  }
}

void Kernels::warm(std::span<const GgmlType> types, uint32_t n_embd, uint32_t head_size,
                   uint32_t lora_ranks, GgmlType head) {
  std::vector<Pipelines::Key> keys;
  for (GgmlType t : types) {
    const std::string ts = weight_type_suffix(t);
    keys.push_back({subgroup_variant("mm_" + ts), {wg_, kTokenTile}});
    keys.push_back({"mt_" + ts, {}});
    warm_tensor_cores(t, head, keys);
    warm_matvec(t, n_embd, keys);
    keys.push_back({"embed_" + ts, {row_wg_}});
  }
  warm_rows_and_wkv(n_embd, head_size, lora_ranks, keys);
  if (pipes_ != nullptr) pipes_->prepare(keys);
}

// mc.comp's and mcd.comp's pipelines that products of type t can take.
void Kernels::warm_tensor_cores(GgmlType t, GgmlType head,
                                std::vector<Pipelines::Key>& keys) const {
  // F32: MmSlot::half_ok; F16: inputs split in two halves (mc.comp MC_SPLIT).
  if (coopmat_ && (!is_float_type(t) || t == GgmlType::F32 || splits_inputs(t))) {
    for (const uint32_t rows : {64u, 128u}) {
      if (rows != mc_rows(t, 0, 0, 0, 1) && (t_.mc_rows != 0 || t != GgmlType::Q4_K || khr_)) {
        continue;
      }
      // The forward's products read the fp16 form of their inputs, but for the LoRA up ones
      // (F32, float inputs) and the head: only the variants it uses (each costs start-up
      // time when no pipeline cache has it; one made on first use cost the H100 150 ms in
      // the middle of a 32-sequence step).
      for (const bool x16 : {false, true}) {
        if (x16 ? !t_.half_inputs || splits_inputs(t)
                : t_.half_inputs && t != GgmlType::F32 && t != head && !splits_inputs(t)) {
          continue;
        }
        if (t_.mc_tokens == 32 || t_.mc_tokens == 64) {
          keys.push_back(mc_key(t, rows, t_.mc_tokens, x16));
          continue;
        }
        keys.push_back(mc_key(t, rows, kTileTokens, x16));
        keys.push_back(mc_key(t, rows, 32, x16));
      }
    }
  }
  if (mcd_on() && (!is_float_type(t) || splits_inputs(t))) keys.push_back(mcd_key(t));
}

// The decode products' pipelines (mv.comp, mvq.comp, mvf.comp, the shifts in front) of type t.
void Kernels::warm_matvec(GgmlType t, uint32_t n_embd, std::vector<Pipelines::Key>& keys) const {
  if (t_.mv_max_t > 0) {
    // The token tiles mv_tokens() can pick, no more: each pipeline costs start-up time.
    for (uint32_t tt = 1; tt <= mv_tokens(t_.mv_max_t, t_.mv_tt_max); tt *= 2) {
      keys.push_back(mv_key(t, tt, mv_rows()));
      if (reads_q8(t, tt)) keys.push_back(mvq_key(t, tt));
      if (reads_q8(t, tt) && mvq_rows(tt, t_.mvq_many_rows) != mvq_rows(tt)) {
        keys.push_back(mvq_key(t, tt, false, t_.mvq_many_rows));  // a head's
      }
      if (writes_q8(t, 32, 16, tt)) keys.push_back(mvq_key(t, tt, true));
    }
    // The shifts in front (runs_shift_in_front()) of a model with short rows: the ffn key
    // product (int8 output), the r/k/v products, the float LoRA down products.
    MmSlot probe{n_embd, 16, 0, 0, MmMode::kStore, 0, 0};
    if (reads_q8(t, 1) && runs_shift_in_front(t, {&probe, 1})) {
      keys.push_back(mvq_ln_key(t, n_embd, false));
      probe.yq_off = 0;
      if (runs_shift_in_front(t, {&probe, 1})) keys.push_back(mvq_ln_key(t, n_embd, true));
    }
  }
  if (t_.mv_max_t > 0 && t_.mvf && is_float_type(t)) {  // the shapes mvf_key() tells apart
    for (const uint64_t w : {uint64_t{1}, t_.mvf_large_weights}) {
      for (const uint32_t n : {1u, t_.mvf_many_rows}) {
        // (Few rows: the LoRA down products' inputs, n_embd, and short ones, the LoRA up's.)
        for (const uint32_t k : {n_embd, 32u}) keys.push_back(mvf_key(t, n, w, k));
      }
    }
    MmSlot probe{n_embd, 16, 0, 0, MmMode::kStore, 16};
    if (runs_shift_in_front(t, {&probe, 1})) keys.push_back(mvf_ln_key(t, n_embd));
  }
}

// The row kernels' and wkv's pipelines.
void Kernels::warm_rows_and_wkv(uint32_t n_embd, uint32_t head_size, uint32_t lora_ranks,
                                std::vector<Pipelines::Key>& keys) const {
  if (prof_.features.int_dot) keys.push_back({"q8", {kQ8Wg}});
  if (coopmat_) {
    keys.push_back({"h16", {kH16Wg}});
    keys.push_back({"mc_sum", {kMcSumWg}});
  }
  keys.push_back(shift_key(n_embd));
  keys.push_back(out_ln_key(n_embd));
  keys.push_back({"argmax", {kArgmaxWg}});
  if (wkv_sg(head_size)) {
    keys.push_back(wkv_key(head_size, 1, false, 0));
    // The long-chunk variant only where some forward can reach it (never on CPU devices).
    if (t_.wkv_long_t != UINT32_MAX) {
      keys.push_back(wkv_key(head_size, t_.wkv_long_t, false, 0));
      if (const Pipelines::Key k = wkv_long_key(head_size); !k.first.empty()) keys.push_back(k);
      keys.push_back({"wkv_out", {head_size, head_size}});
    }
    if (lora_ranks > 0 && wkv_fuses_lora(head_size, lora_ranks)) {
      keys.push_back(wkv_key(head_size, 1, true, lora_ranks));
      if (t_.wkv_group > 1) keys.push_back(wkv_key(head_size, 1, true, lora_ranks, true));
    }
  } else {
    keys.push_back({"wkv", {head_size, head_size}});
  }
}

// Rows per subgroup: 2, so each lane has twice the loads in flight and each decoded x meets two
// rows. H100, vk_kernel_bench: Q4_K 2560 -> 10240 at one token 19.4 -> 16.5 us (rows 4: 21.2);
// 2.9B Q4_K_M gen-8 +13%, gen-32 +29% over one row.
// (F16 at one token took 4 rows for large products, 2560 -> 10240 31.1 -> 28.3 us, until
// mvf.comp took float weights at one token: 21.7.)
uint32_t Kernels::mv_rows() const {
  return t_.mv_rows > 0 ? t_.mv_rows : 2;
}

// mvq.comp's rows per subgroup: one at one token (H100 vk_kernel_bench, int8 inputs, one row
// against two: Q4_K 2560 -> 10240 13.6 -> 12.5 us, 10240 -> 2560 13.7 -> 12.0, 2560 -> 2560 7.0
// -> 6.1; Q6_K 10240 -> 2560 22.7 -> 17.2), two for several tokens (each decoded piece then meets
// twice the tokens' sums: Q4_K 2560 -> 10240 at 8 tokens 34 us against 40 with one row). A head
// (Tuning::mvq_many_rows rows and more) takes four at one token: each subgroup's reduction and
// stores then serve four rows.
uint32_t Kernels::mvq_rows(uint32_t tokens, uint32_t n) const {
  if (t_.mv_rows > 0) return t_.mv_rows;
  if (tokens > 1) return 2;
  return n >= t_.mvq_many_rows ? 4 : 1;
}

uint32_t Kernels::row_groups(uint32_t max_n, uint32_t rows) const {
  return std::min({ceil_div(max_n, rows), prof_.max_workgroup_count, t_.max_row_groups});
}

uint32_t Kernels::mv_wg(uint32_t tokens) const {
  return tokens == 1 ? t_.mv_wg_one : t_.mv_wg;
}

std::string Kernels::subgroup_variant(const std::string& shader) const {
  return prof_.features.subgroup_arith ? shader + "_sg" : shader;
}

Pipelines::Key Kernels::mv_key(GgmlType type, uint32_t tt, uint32_t rows) const {
  return {"mv_" + weight_type_suffix(type), {mv_wg(tt), tt, rows, mv_chunk(prof_)}};
}

bool Kernels::takes_mvf(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const {
  return t_.mvf && T == 1 && is_float_type(type) &&
         std::all_of(slots.begin(), slots.end(), [](const MmSlot& s) {
           return s.row_bytes % 16 == 0 && s.x_off % 4 == 0 && s.yq_off == kNoQ8;
         });
}

// A row's team and the workgroup: products of few rows (below Tuning::mvf_many_rows: the LoRA
// down products' 576) take workgroups of 64 and few_rows_team(); others 128 and two subgroups a
// row, four for large products (Tuning::mvf_large_weights: their rows are long, or many wait
// their turn).
//
// F16 products of many rows take two rows a subgroup and two words a lane in flight for each
// (H200, vk_kernel_bench, us, words 4 and one row against two and two: F16 10240 -> 2560 21.4 ->
// 16.3, 2560 -> 10240 17.4 -> 17.3, 2560 -> 2560 7.56 -> 7.31; F32 10240 -> 2560 28.5 -> 28.1 but
// 2560 -> 10240 27.5 -> 28.6 and 2560 -> 2560 9.63 -> 9.99, the F32 LoRA down 5.95 -> 8.37, so
// those keep one row and 4 words). A lane's sums run in the same order either way.
Pipelines::Key Kernels::mvf_key(GgmlType type, uint32_t max_n, uint64_t weights, uint32_t K) const {
  const bool few = max_n < t_.mvf_many_rows, pairs = type == GgmlType::F16 && !few;
  const uint32_t wg =
      t_.mvf_wg > 0 ? t_.mvf_wg : std::max(prof_.features.subgroup_size, few ? 64u : 128u);
  uint32_t ks = few                               ? few_rows_team(type, K)  // (it heeds t_.mvf_ks)
                : t_.mvf_ks > 0                   ? t_.mvf_ks
                : weights >= t_.mvf_large_weights ? 4
                                                  : 2;
  ks = std::bit_floor(std::clamp(ks, 1u, wg / prof_.features.subgroup_size));
  return {"mvf_" + weight_type_suffix(type),
          {wg, mvf_words(pairs ? 2 : 4), mvf_rows(pairs ? 2 : 1), ks}};
}

uint32_t Kernels::mvf_words(uint32_t by_shape) const {
  return t_.mvf_words > 0 ? t_.mvf_words : by_shape;
}

uint32_t Kernels::mvf_rows(uint32_t by_shape) const {
  return t_.mvf_rows > 0 ? t_.mvf_rows : by_shape;
}

// mvq.comp stages nothing, so its workgroup is the one-token size for any number of tokens;
// the variant that writes its output's int8 form takes 16 rows a workgroup (whole runs).
Pipelines::Key Kernels::mvq_key(GgmlType type, uint32_t tt, bool qout, uint32_t n) const {
  return {"mvq_" + weight_type_suffix(type),
          {qout ? mvq_qout_wg(tt) : t_.mvq_wg, tt, mvq_rows(tt, qout ? 0 : n), t_.mvq_pieces,
           qout ? 1u : 0u}};
}

uint32_t Kernels::row_quads(uint32_t D) const {
  return std::max(1u, ceil_div(D / 4, row_wg_));
}

// The _sg variant needs shuffles (the int8 form's runs); the other writes neither form.
Pipelines::Key Kernels::shift_key(uint32_t D) const {
  return {prof_.features.subgroup_shuffle ? "shift_sg" : "shift", {row_wg_, row_quads(D)}};
}

uint32_t Kernels::mvq_qout_wg(uint32_t tokens) const {
  return 16 / mvq_rows(tokens) * prof_.features.subgroup_size;
}

// Products with the shift in front: the shift's lanes and quads a lane (LNL, LNQ) are
// shift.comp's, so that its sums run in the same order, and the workgroup holds at least those
// lanes; KMAX sizes the shared input.
Pipelines::Key Kernels::mvq_ln_key(GgmlType type, uint32_t K, bool qout) const {
  const uint32_t wg = qout ? mvq_qout_wg(1) : std::max(t_.mvq_wg, row_wg_);
  return {"mvq_ln_" + weight_type_suffix(type),
          {wg, 1, mvq_rows(1), t_.mvq_pieces, qout ? 1u : 0u, row_wg_, row_quads(K), K}};
}

// Subgroups a row of a product of few float rows (the LoRA down products) with K inputs, in front
// of the shift or not (the same team, so the same sums): one for F32 rows from
// Tuning::mvf_one_subgroup_k inputs (the LoRA weights of quantised files; F16 ones were not
// measured), else two.
uint32_t Kernels::few_rows_team(GgmlType type, uint32_t K) const {
  return t_.mvf_ks > 0 ? t_.mvf_ks : type == GgmlType::F32 && K >= t_.mvf_one_subgroup_k ? 1u : 2u;
}

Pipelines::Key Kernels::mvf_ln_key(GgmlType type, uint32_t K) const {
  const uint32_t sg = prof_.features.subgroup_size, wg = std::max(row_wg_, sg);
  const uint32_t ks = std::bit_floor(std::clamp(few_rows_team(type, K), 1u, wg / sg));
  return {"mvf_ln_" + weight_type_suffix(type),
          {wg, mvf_words(4), mvf_rows(1), ks, row_wg_, row_quads(K), K}};
}

bool Kernels::runs_shift_in_front(GgmlType type, std::span<const MmSlot> slots) const {
  if (!t_.shift_in_front || slots.empty() || !prof_.features.subgroup_shuffle ||
      row_wg_ % 16 != 0) {
    return false;
  }
  // (The ffn key product is the one that writes its output's int8 form.)
  const uint32_t K = slots[0].K;
  const bool qout = slots[0].yq_off != kNoQ8;
  for (const MmSlot& sl : slots) {
    if (sl.K != K || K > (qout ? t_.ffn_front_most_k : t_.att_front_most_k) || K % 32 != 0) {
      return false;
    }
  }
  // The kernels mm() takes at one token: mvf.comp for float weights, mvq.comp for int8 inputs
  // (the int8 runs of the shift gather over four neighbouring lanes: its lanes come first).
  if (t_.mv_max_t == 0 || few_on_coopmat(1)) return false;
  // Float products: only those of few rows (the LoRA down products). The shift needs workgroups of
  // shift.comp's 256 lanes, and large float products lose with them: 1.5B F16's r/k/v (2048 rows)
  // 508, 511 -> 490, 491 tok/s (H100, alternating); 0.1B F16 even (1629, 1494 / 1622, 1583).
  if (takes_mvf(type, slots, 1)) {
    return std::all_of(slots.begin(), slots.end(),
                       [&](const MmSlot& s) { return s.N < t_.mvf_many_rows; });
  }
  const bool q8 = reads_q8(type, 1) && std::all_of(slots.begin(), slots.end(), [](const MmSlot& s) {
                    return s.q8_off != kNoQ8;
                  });
  return q8 && (!qout || (slots.size() == 1 && writes_q8(type, K, slots[0].N, 1) &&
                          mvq_qout_wg(1) >= row_wg_));
}

// A row of K inputs takes K / 32 pieces, U * subgroup size a step: a long row (K = 10240, five
// steps) leaves its few subgroups (2560 rows) waiting out one load latency after another, so
// subgroups of a workgroup share it while each keeps at least a whole step.
uint32_t Kernels::mvq_ksplit(uint32_t K) const {
  const uint32_t sg = prof_.features.subgroup_size, subgroups = t_.mvq_wg / sg;
  const uint32_t steps = K / 32 / (t_.mvq_pieces * sg);
  uint32_t ks = t_.mvq_ksplit > 0 ? t_.mvq_ksplit : steps;
  ks = std::bit_floor(std::clamp(ks, 1u, subgroups));
  // mvq.comp's s_ks holds subgroups x rows x tokens partial sums, at most 256.
  return subgroups * mvq_rows(t_.mv_tt_max) * t_.mv_tt_max <= 256 ? ks : 1;
}

bool Kernels::writes_q8(GgmlType type, uint32_t K, uint32_t N, uint32_t T) const {
  const uint32_t tt = mv_tokens(T, t_.mv_tt_max);
  // The variant that writes y's int8 form does not split K (its workgroups own 16 rows).
  return reads_q8(type, T) && mvq_ksplit(K) == 1 && N % 16 == 0 && 16 % mvq_rows(tt) == 0 &&
         mvq_qout_wg(tt) <=
             std::min({prof_.max_workgroup_size, prof_.max_workgroup_invocations, 1024u});
}

bool Kernels::reads_q8(GgmlType type, uint32_t T) const {
  return prof_.features.int_dot && prof_.features.subgroup_shuffle && t_.mv_max_t > 0 &&
         T <= t_.mv_max_t && has_int8_product(type);
}

void Kernels::quantize_q8(VkCommandBuffer cb, VkDescriptorSet set, uint32_t K, uint32_t T,
                          uint32_t x_off, uint32_t q_off) {
  if (K % 32 != 0 || T == 0) throw EngineError("vk quantize_q8: K % 32 == 0 and T > 0 required");
  const Q8Push pc{K, T, x_off, q_off};
  bind(cb, set, {"q8", {kQ8Wg}}, &pc, sizeof(pc));
  dispatch(cb, ceil_div(K / 4, kQ8Wg), T, 1);
}

bool Kernels::reads_h16(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const {
  return t_.half_inputs && !splits_inputs(type) && !slots.empty() &&
         std::all_of(slots.begin(), slots.end(), [&](const MmSlot& s) {
           return s.h16_off != kNoQ8 && uses_coopmat(type, s.K, T, s.half_ok);
         });
}

bool Kernels::writes_h16(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const {
  // mcd.comp, or mc.comp unsplit (mc_sum.comp writes no fp16 form).
  return reads_h16(type, slots, T) && (few_on_coopmat(T) || mc_split(slots) == 1) &&
         std::all_of(slots.begin(), slots.end(), [](const MmSlot& s) { return s.N % 2 == 0; });
}

void Kernels::to_half(VkCommandBuffer cb, VkDescriptorSet set, uint32_t T,
                      std::span<const HalfRegion> regions) {
  if (regions.empty() || regions.size() > kHalfRegions || T == 0) {
    throw EngineError("vk to_half: 1 to 8 regions and T > 0 required");
  }
  H16Push pc{};
  pc.T = T;
  uint32_t max_k = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    if (regions[i].K % 8 != 0) throw EngineError("vk to_half: K % 8 == 0 required");
    pc.K[i] = regions[i].K;
    pc.x_off[i] = regions[i].x_off;
    pc.h_off[i] = regions[i].h_off;
    max_k = std::max(max_k, regions[i].K);
  }
  bind(cb, set, {"h16", {kH16Wg}}, &pc, sizeof(pc));
  dispatch(cb, ceil_div(max_k / 8, kH16Wg), T, static_cast<uint32_t>(regions.size()));
}

bool Kernels::uses_coopmat(GgmlType type, uint32_t K, uint32_t T, bool half_ok) const {
  if (!coopmat_) return false;
  if (few_on_coopmat(T)) {
    return K % kMcStepK == 0 && (!is_float_type(type) || splits_inputs(type));
  }
  // mc.comp takes float rows of an odd number of 32-input pieces too (its kOddPieces): the LoRA
  // up products of rank 96 (2.9B) or 32 (0.1B) ran on mt.comp's fp32, 7.6% of 2.9B's doc state.
  if (K % (is_float_type(type) ? kMcPieceK : kMcStepK) != 0) return false;
  const bool typed =
      !is_float_type(type) || (half_ok && type == GgmlType::F32) || splits_inputs(type);
  return typed && T > t_.mv_max_t && T >= t_.mt_min_t;
}

// (MC_KHR takes no split inputs: F16 weights stay on the fp32 kernels there.)
bool Kernels::splits_inputs(GgmlType type) const {
  return type == GgmlType::F16 && t_.f16_split && !khr_;
}

// (mcd.comp is VK_NV_cooperative_matrix's alone.)
bool Kernels::mcd_on() const {
  return coopmat_ && !khr_ && t_.half_inputs && t_.mcd_max_t > 0;
}

bool Kernels::few_on_coopmat(uint32_t T) const {
  return mcd_on() && T >= t_.mcd_min_t && T <= t_.mcd_max_t;
}

bool Kernels::head_on_coopmat(GgmlType type, uint32_t rows) const {
  return few_on_coopmat(rows) && !(type == GgmlType::Q6_K && rows <= t_.q6_head_int8_max);
}

Pipelines::Key Kernels::mcd_key(GgmlType type) const {
  // Split inputs take a third tile a subgroup: at most 4 subgroups fit mcd.comp's shared memory.
  const uint32_t sg = splits_inputs(type) ? std::min(t_.mcd_sg, 4u) : t_.mcd_sg;
  return {"mcd_" + weight_type_suffix(type), {32 * sg}};
}

Pipelines::Key Kernels::mc_key(GgmlType type, uint32_t rows, uint32_t tokens, bool x16) const {
  // Constant 0 (the workgroup size, fixed in the shader) keeps the ids in common.glsl's order;
  // MC_KHR's 2-5: the device's fragment and subgroup size.
  if (khr_) {
    const DeviceFeatures& f = prof_.features;
    return {mc_name(type, rows, tokens),
            {2 * rows, x16 ? 1u : 0u, f.khr_m, f.khr_n, f.khr_k, f.subgroup_size}};
  }
  return {mc_name(type, rows, tokens), {2 * rows, x16 ? 1u : 0u}};
}

uint32_t Kernels::mc_split(std::span<const MmSlot> slots) const {
  const MmSlot& first = slots.front();
  if (first.part_off == kNoQ8 || t_.mc_split == 1) return 1;
  uint32_t tiles = 0, rows = 0, steps = 0;
  for (const MmSlot& s : slots) {
    tiles += ceil_div(s.N, kTileRows);
    rows += s.N;
    steps = std::max(steps, s.K / kMcStepK);
  }
  // Every slot's steps of K divide evenly among the parts.
  const auto divides = [&](uint32_t parts) {
    return std::all_of(slots.begin(), slots.end(), [&](const MmSlot& s) {
      return s.K % kMcStepK == 0 && (s.K / kMcStepK) % parts == 0;
    });
  };
  // Products of few row tiles (Tuning::mc_split_tiles) split, those with long rows further
  // (Tuning::mc_split_steps).
  const uint32_t most = t_.mc_split >= 2 ? std::min(t_.mc_split, kMcSplitMost) : kMcSplitMost;
  const bool few_tiles = tiles < t_.mc_split_tiles;
  const auto wants = [&](uint32_t split) {
    return t_.mc_split >= 2 || tiles * split < t_.mc_split_tiles ||
           (few_tiles && steps / split > t_.mc_split_steps);
  };
  uint32_t split = 1;
  while (split < most && wants(split) && divides(2 * split) &&
         2 * split * rows <= first.part_width) {
    split *= 2;
  }
  return split;
}

uint32_t Kernels::mcd_split(std::span<const MmSlot> slots) const {
  const MmSlot& first = slots.front();
  if (first.part_off == kNoQ8 || t_.mcd_split == 1) return 1;
  // mc_sum.comp writes no fp16 form of the output.
  if (std::any_of(slots.begin(), slots.end(), [](const MmSlot& s) { return s.yh_off != kNoQ8; })) {
    return 1;
  }
  uint32_t tiles = 0, rows = 0, steps = UINT32_MAX;
  for (const MmSlot& s : slots) {
    tiles += ceil_div(s.N, kMcdRows);
    rows += s.N;
    steps = std::min(steps, s.K / 64);
  }
  const auto fits = [&](uint32_t parts) {
    return std::all_of(slots.begin(), slots.end(),
                       [&](const MmSlot& s) { return (s.K / 64) % parts == 0; }) &&
           parts * rows <= first.part_width;
  };
  if (t_.mcd_split >= 2) return fits(t_.mcd_split) ? t_.mcd_split : 1;
  uint32_t split = 1;
  while (tiles * 2 * split <= t_.mcd_split_tiles &&
         steps / (2 * split) / t_.mcd_sg >= t_.mcd_split_min_steps && fits(2 * split)) {
    split *= 2;
  }
  return split;
}

std::string Kernels::mc_name(GgmlType type, uint32_t rows, uint32_t tokens) const {
  return (khr_ ? "mck_" : "mc_") + weight_type_suffix(type) + (rows == 128 ? "_r128" : "") +
         (tokens == 32 ? "_t32" : "");
}

uint32_t Kernels::mc_rows(GgmlType type, uint32_t max_n, uint32_t T, uint32_t n_slots,
                          uint32_t split) const {
  // A 128-row tile with two input tiles: too many registers; MC_KHR's tiles are of 64.
  if (splits_inputs(type) || khr_) return 64;
  if (t_.mc_rows == 64 || t_.mc_rows == 128) return t_.mc_rows;
  // 128-row tiles read the tokens' inputs half as often, but make half the workgroups (two an
  // SM fit, against four of 64 rows): Q4_K takes them from Tuning::mc_tall_grid workgroups of
  // 128 rows (split-K parts counted); Q6_K was slower at every shape (its pieces cost more to
  // decode), other types were not measured. The rows of a tile change no sum's order (each
  // output's K runs the same steps in either).
  const uint32_t grid = ceil_div(max_n, 128) * ceil_div(T, kTileTokens) * n_slots * split;
  return type == GgmlType::Q4_K && grid >= t_.mc_tall_grid ? 128 : 64;
}

bool Kernels::wkv_sg(uint32_t head_size) const {
  const DeviceFeatures& f = prof_.features;
  return f.subgroup_shuffle && f.subgroup_size <= head_size && 4 * head_size <= 256 &&
         4 * head_size <= prof_.max_workgroup_size && !t_.wkv_portable;
}

std::vector<std::string> Kernels::choices(uint32_t head_size) const {
  std::vector<std::string> out{std::string("tuning=") + device_class_name(prof_.device_class())};
  if (prof_.features.subgroup_arith) {
    out.push_back("subgroup_size=" + std::to_string(prof_.features.subgroup_size));
  }
  if (t_.mv_max_t > 0) out.push_back("decode_matvec");
  if (t_.mv_max_t > 0 && t_.mvf) out.push_back("float_matvec");
  if (coopmat_) out.push_back("tensor_cores");
  if (khr_) {
    const DeviceFeatures& f = prof_.features;
    out.push_back("tensor_cores_khr=" + std::to_string(f.khr_m) + "x" + std::to_string(f.khr_n) +
                  "x" + std::to_string(f.khr_k));
  }
  if (coopmat_ && splits_inputs(GgmlType::F16)) out.push_back("tensor_cores_f16_split_inputs");
  if (mcd_on()) out.push_back("tensor_cores_decode");
  if (prof_.features.int_dot && t_.mv_max_t > 0) {
    out.push_back(prof_.features.int_dot_fast ? "int8_decode" : "int8_decode_emulated");
  }
  out.push_back(wkv_sg(head_size) ? "wkv_subgroup" : "wkv_portable");
  return out;
}

Kernels::WkvLora Kernels::wkv_lora(uint32_t head_size, uint32_t lora_ranks) const {
  const uint32_t most =
      std::min({prof_.features.subgroup_size, prof_.max_workgroup_size / head_size,
                prof_.max_workgroup_invocations / head_size, 16u});
  const uint32_t smem = prof_.max_shared_memory;
  for (uint32_t pl = t_.wkv_lanes; pl <= most; pl *= 2) {
    const uint32_t loads = ceil_div(lora_ranks / 4, pl);
    if (loads > kWkvLoraLoadsMax || wkv_shared_bytes(head_size, pl, kWkvBlock, loads) > smem) {
      continue;
    }
    // Every token of a block staged at once where shared memory allows, else one at a time.
    const bool all = wkv_shared_bytes(head_size, pl, kWkvBlock, loads, kWkvBlock) <= smem;
    return {pl, loads, all ? kWkvBlock : 1};
  }
  return {};
}

Pipelines::Key Kernels::wkv_key(uint32_t head_size, uint32_t T, bool lora, uint32_t lora_ranks,
                                bool grouped) const {
  uint32_t lanes = 4, block = kWkvBlock, loads = 0, staged = 1;
  if (lora) {
    const WkvLora l = wkv_lora(head_size, lora_ranks);
    lanes = l.lanes;
    loads = l.loads;
    staged = l.staged;
  } else if (T >= t_.wkv_long_t) {
    const uint32_t most = std::min(prof_.max_workgroup_size, prof_.max_workgroup_invocations);
    lanes = std::max(4u, std::min(t_.wkv_long_lanes, std::bit_floor(most / head_size)));
    block = t_.wkv_long_block;
    while (block > kWkvBlock &&
           wkv_shared_bytes(head_size, lanes, block, 0) > prof_.max_shared_memory) {
      block -= 4;
    }
  }
  return {"wkv_sg", {lanes * head_size, head_size, block, lanes, loads, staged, grouped ? 1u : 0u}};
}

// Twice phase B's invocations (the rest run phase A), and as many tokens a block (a multiple of
// 4, at most Tuning::wkv_long_block) as two buffers of its six shared arrays leave room for.
Pipelines::Key Kernels::wkv_long_key(uint32_t head_size) const {
  const uint32_t sg = prof_.features.subgroup_size, wg = 2 * kWkvRowLanes * head_size;
  if (!t_.wkv_pipelined || !wkv_sg(head_size) || sg > head_size || !prof_.features.subgroup_arith ||
      wg > std::min(prof_.max_workgroup_size, prof_.max_workgroup_invocations)) {
    return {};
  }
  const auto shared_bytes = [&](uint32_t block) { return 48 * block * head_size + 16 * 256; };
  uint32_t block = t_.wkv_long_block;
  while (block > 4 && shared_bytes(block) > prof_.max_shared_memory) block -= 4;
  if (shared_bytes(block) > prof_.max_shared_memory) return {};
  return {"wkv_long", {wg, head_size, block, sg}};
}

// Phase B of a long chunk is a chain of latencies per warp (docs/PERFORMANCE.md), and
// a head's 64 rows take 8 warps, two to each of an SM's four schedulers: with fewer (head,
// sequence) workgroups than SMs, each head's rows go to 2, 4 or 8 workgroups, whose redundant
// phase A runs on SMs that would otherwise idle, as long as they all fit one wave (2.9B: 4
// slices, 160 workgroups, lost to 2).
uint32_t Kernels::wkv_slices(uint32_t n_head, uint32_t head_size, uint32_t n_seq) const {
  // (wkv_long.comp: a slice's phase B takes whole subgroups.)
  const uint32_t most = std::min({kWkvMostSlices, head_size / kWkvSliceRows,
                                  kWkvRowLanes * head_size / prof_.features.subgroup_size});
  if (t_.wkv_slices != 0) return std::min(t_.wkv_slices, most);
  uint32_t slices = 1;
  while (slices < std::min(most, t_.wkv_slices_most) &&
         n_head * n_seq * slices * 2 <= t_.wkv_slice_grid) {
    slices *= 2;
  }
  return slices;
}

bool Kernels::wkv_fuses_lora(uint32_t head_size, uint32_t lora_ranks) const {
  return wkv_sg(head_size) && t_.fuse_lora && lora_ranks % 4 == 0 &&
         wkv_lora(head_size, lora_ranks).lanes != 0;
}

void Kernels::bind(VkCommandBuffer cb, VkDescriptorSet set, const Pipelines::Key& key,
                   const void* pc, uint32_t size) {
  ++dispatches_;
  if (pipes_ == nullptr) {
    log_.push_back({key});
    return;
  }
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_->get(key.first, key.second));
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_->layout(), 0, 1, &set, 0,
                          nullptr);
  vkCmdPushConstants(cb, pipes_->layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, size, pc);
}

void Kernels::dispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z) {
  if (pipes_ == nullptr) {
    log_.back().x = x;
    log_.back().y = y;
    log_.back().z = z;
    return;
  }
  vkCmdDispatch(cb, x, y, z);
}

const char* mm_input_name(MmInput input) {
  switch (input) {
    case MmInput::kInt8:
      return "int8";
    case MmInput::kHalf:
      return "fp16";
    case MmInput::kHalves:
      return "fp16x2";
    case MmInput::kFloat:
      break;
  }
  return "f32";
}

// One plan_mm() call: its arguments and what its parts share, and the plan they fill in.
struct Kernels::MmCall {
  GgmlType type;
  std::span<const MmSlot> slots;
  uint32_t T;
  MmPlan plan;
  uint32_t max_n = 0, n_slots = 0;
  bool qout = false;  // some slot wants its output's int8 form too
};

void Kernels::mm(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type,
                 std::span<const MmSlot> slots, uint32_t T) {
  record_mm(cb, set, plan_mm(type, slots, T));
}

MmPlan Kernels::plan_mm(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const {
  MmCall c{type, slots, T};
  mm_prepare(c);
  const bool k32 =
      std::all_of(slots.begin(), slots.end(), [](const MmSlot& s) { return s.K % 32 == 0; });
  const bool coopmat = std::all_of(slots.begin(), slots.end(), [&](const MmSlot& s) {
    return uses_coopmat(type, s.K, T, s.half_ok);
  });
  // (F16 weights read the float inputs, which mcd.comp splits in two fp16 halves; like the fp16
  // forms' products, only with K a multiple of its 64-input steps: a LoRA up product of rank 32
  // would otherwise take none and come out 0.)
  const bool halves =
      splits_inputs(type) && std::all_of(slots.begin(), slots.end(), [&](const MmSlot& s) {
        return s.x_off % 8 == 0 && uses_coopmat(type, s.K, T);
      });
  if (k32 && !c.qout && few_on_coopmat(T) && (halves || reads_h16(type, slots, T))) {
    mm_few_on_coopmat(c, halves);
  } else if (k32 && T <= t_.mv_max_t && takes_mvf(type, slots, T)) {
    mm_float_matvec(c);
  } else if (k32 && T <= t_.mv_max_t) {
    mm_matvec(c);
  } else if (k32 && T >= t_.mt_min_t) {  // (mv: T <= max)
    coopmat ? mm_coopmat(c) : mm_tiled(c);
  } else {
    mm_portable(c);
  }
  if (c.plan.writes_h16 && c.plan.input != MmInput::kHalf) {
    throw EngineError("vk mm: this product cannot write its output's fp16 form");
  }
  return c.plan;
}

void Kernels::record_mm(VkCommandBuffer cb, VkDescriptorSet set, const MmPlan& p) {
  bind(cb, set, p.key, &p.pc, sizeof(p.pc));
  dispatch(cb, p.x, p.y, p.z);
  if (p.split > 1) {
    compute_barrier(cb);
    bind(cb, set, {"mc_sum", {kMcSumWg}}, &p.pc, sizeof(p.pc));
    dispatch(cb, p.sum_x, p.sum_y, 1);
  }
}

// The checks of a plan_mm() call and its push constants as the slots give them.
void Kernels::mm_prepare(MmCall& c) const {
  const std::span<const MmSlot> slots = c.slots;
  if (slots.empty() || slots.size() > kWeightBindings || c.T == 0) {
    throw EngineError("vk mm: 1..4 slots and T > 0 required");
  }
  if (slots[0].front.rec != kNoQ8 && (c.T != 1 || !runs_shift_in_front(c.type, slots))) {
    throw EngineError("vk mm: these products cannot run the shift in front");
  }
  MmPush& pc = c.plan.pc;
  for (size_t i = 0; i < slots.size(); ++i) {
    const MmSlot& s = slots[i];
    if (s.K % 8 != 0) throw EngineError("vk mm: K must be a multiple of 8");
    pc.K[i] = s.K;
    pc.N[i] = s.N;
    pc.x_off[i] = s.x_off;
    pc.y_off[i] = s.y_off;
    pc.mode[i] = static_cast<uint32_t>(s.mode);
    pc.row_bytes[i] = s.row_bytes;
    pc.yq_off[i] = s.yq_off;
    c.max_n = std::max(c.max_n, s.N);
    if (s.yq_off != kNoQ8) {
      if (s.q8_off == kNoQ8 || !writes_q8(c.type, s.K, s.N, c.T)) {
        throw EngineError("vk mm: this product cannot write its output's int8 form");
      }
      c.qout = true;
    }
  }
  pc.T = c.T;
  c.n_slots = static_cast<uint32_t>(slots.size());
  c.plan.writes_q8 = c.qout;
  c.plan.shift_in_front = slots[0].front.rec != kNoQ8;
  c.plan.writes_h16 =
      std::any_of(slots.begin(), slots.end(), [](const MmSlot& s) { return s.yh_off != kNoQ8; });
  if (c.plan.writes_h16 && !writes_h16(c.type, slots, c.T)) {
    throw EngineError("vk mm: this product cannot write its output's fp16 form");
  }
}

// Tensor-core products: `key` over gx x gy workgroups a slot and part of K; with split-K parts
// (mc_split, mcd_split) mc_sum.comp then adds their partial sums in order, through the epilogue.
void Kernels::mm_parts(MmCall& c, const Pipelines::Key& key, uint32_t split, uint32_t gx,
                       uint32_t gy) const {
  MmPlan& p = c.plan;
  if (split > 1) {
    p.pc.ksplit = split;
    p.pc.part_off = c.slots[0].part_off;
    p.pc.part_width = c.slots[0].part_width;
    p.sum_x = ceil_div(c.T * c.max_n, kMcSumWg);
    p.sum_y = c.n_slots;
  }
  p.key = key;
  p.split = split;
  p.x = gx;
  p.y = gy;
  p.z = c.n_slots * split;
}

// mcd.comp: from the inputs' fp16 form, or (halves) from the floats split in two halves.
void Kernels::mm_few_on_coopmat(MmCall& c, bool halves) const {
  c.plan.input = halves ? MmInput::kHalves : MmInput::kHalf;
  for (size_t i = 0; i < c.slots.size() && !halves; ++i) {
    c.plan.pc.x_off[i] = c.slots[i].h16_off;
    c.plan.pc.yq_off[i] = c.slots[i].yh_off;
  }
  mm_parts(c, mcd_key(c.type), mcd_split(c.slots), ceil_div(c.max_n, kMcdRows),
           ceil_div(c.T, kMcdTokens));
}

// mvf.comp: float weights at one token, maybe with the shift in front.
void Kernels::mm_float_matvec(MmCall& c) const {
  uint64_t weights = 0;  // the largest slot's
  uint32_t k_max = 0;    // the longest row's
  for (const MmSlot& sl : c.slots) {
    weights = std::max<uint64_t>(weights, uint64_t{sl.K} * sl.N);
    k_max = std::max(k_max, sl.K);
  }
  const bool front = c.plan.shift_in_front;
  const Pipelines::Key key =
      front ? mvf_ln_key(c.type, c.slots[0].K) : mvf_key(c.type, c.max_n, weights, k_max);
  if (front) set_front(c.slots, c.plan.pc);
  const uint32_t rows =
      key.second[0] / prof_.features.subgroup_size / key.second[3] * key.second[2];
  c.plan.key = key;
  c.plan.x = row_groups(c.max_n, rows);
  c.plan.y = 1;
  c.plan.z = c.n_slots;
}

// mvq.comp on the inputs' int8 form (maybe with the shift in front), else mv.comp.
void Kernels::mm_matvec(MmCall& c) const {
  MmPush& pc = c.plan.pc;
  const uint32_t tt = mv_tokens(c.T, t_.mv_tt_max);
  const bool q8 =
      reads_q8(c.type, c.T) && std::all_of(c.slots.begin(), c.slots.end(),
                                           [](const MmSlot& s) { return s.q8_off != kNoQ8; });
  if (q8) {
    c.plan.input = MmInput::kInt8;
    for (size_t i = 0; i < c.slots.size(); ++i) pc.x_off[i] = c.slots[i].q8_off;
  }
  if (q8 && !c.qout) {
    uint32_t k_min = UINT32_MAX;
    for (const MmSlot& sl : c.slots) k_min = std::min(k_min, sl.K);
    pc.ksplit = mvq_ksplit(k_min);
  }
  const bool front = c.plan.shift_in_front;
  if (front) {  // (int8 inputs: mm_prepare()'s check of runs_shift_in_front())
    set_front(c.slots, pc);
    pc.ksplit = 1;
  }
  const Pipelines::Key key = front ? mvq_ln_key(c.type, c.slots[0].K, c.qout)
                             : q8  ? mvq_key(c.type, tt, c.qout, c.max_n)
                                   : mv_key(c.type, tt, mv_rows());
  // Rows a workgroup: its subgroups (per part of K) times the pipeline's rows a subgroup
  // (specialization constant 2 of all three kernels).
  const uint32_t rows = key.second[0] / prof_.features.subgroup_size / pc.ksplit * key.second[2];
  c.plan.key = key;
  c.plan.x = row_groups(c.max_n, rows);
  c.plan.y = ceil_div(c.T, tt);
  c.plan.z = c.n_slots;
}

// mc.comp, tiles of 64 or 128 rows by 64 or 32 tokens.
void Kernels::mm_coopmat(MmCall& c) const {
  // 32-token tiles where 64-token ones would leave the GPU short of invocations
  // (Tuning::mc_small_grid; a 128-row workgroup counts twice a 64-row one).
  // Q6_K takes 64-token tiles whenever it has 64 tokens: its pieces cost the most to decode,
  // and a wider tile decodes each for more tokens (10240 -> 2560 703 -> 609 us, 2560 -> 2560
  // 169 -> 153 us; Q4_K 2560 -> 2560 111 -> 117 us the other way).
  const uint32_t split = mc_split(c.slots);
  const uint32_t rows = mc_rows(c.type, c.max_n, c.T, c.n_slots, split);
  const uint32_t grid = ceil_div(c.max_n, rows) * ceil_div(c.T, kTileTokens) * c.n_slots * split;
  uint32_t tokens = grid * (rows / kTileRows) < t_.mc_small_grid ? 32 : kTileTokens;
  if (c.type == GgmlType::Q6_K && c.T > 32) tokens = kTileTokens;
  if (t_.mc_tokens == 32 || t_.mc_tokens == 64) tokens = t_.mc_tokens;
  // The inputs' fp16 form where every slot has one (the forward writes it for its large
  // products): half the bytes of the reads that dominate mc.comp's traffic.
  const bool x16 = reads_h16(c.type, c.slots, c.T);
  if (x16) {
    c.plan.input = MmInput::kHalf;
    for (size_t i = 0; i < c.slots.size(); ++i) {
      MmPush& pc = c.plan.pc;
      pc.x_off[i] = c.slots[i].h16_off;
      pc.yq_off[i] = c.slots[i].yh_off;
      if (c.slots[i].yh_off != kNoQ8 && c.slots[i].y_half_only) pc.mode[i] |= kModeHalfOnly;
    }
  }
  mm_parts(c, mc_key(c.type, rows, tokens, x16), split, ceil_div(c.max_n, rows),
           ceil_div(c.T, tokens));
}

// mt.comp: fp32 tiles of 64 rows by 64 tokens.
void Kernels::mm_tiled(MmCall& c) const {
  c.plan.key = {"mt_" + weight_type_suffix(c.type), {}};
  c.plan.x = ceil_div(c.max_n, kTileRows);
  c.plan.y = ceil_div(c.T, kTileTokens);
  c.plan.z = c.n_slots;
}

// mm.comp: any shape; rows a workgroup: one per subgroup, or one (workgroup reduction).
void Kernels::mm_portable(MmCall& c) const {
  const uint32_t rows =
      prof_.features.subgroup_arith ? std::max(1u, wg_ / prof_.features.subgroup_size) : 1u;
  c.plan.key = {subgroup_variant("mm_" + weight_type_suffix(c.type)), {wg_, kTokenTile}};
  c.plan.x = row_groups(c.max_n, rows);
  c.plan.y = ceil_div(c.T, kTokenTile);
  c.plan.z = c.n_slots;
}

void Kernels::embed(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, const EmbedArgs& a,
                    uint32_t T) {
  bind(cb, set, {"embed_" + weight_type_suffix(type), {row_wg_}}, &a, sizeof(a));
  dispatch(cb, T, 1, 1);
}

void Kernels::shift(VkCommandBuffer cb, VkDescriptorSet set, const ShiftArgs& a, uint32_t T) {
  if (a.n_lerp > 6) throw EngineError("vk shift: at most 6 outputs");
  if (a.q8_mask != 0 && (a.D % 16 != 0 || row_wg_ % 16 != 0)) {
    throw EngineError("vk shift: the int8 form needs D and the workgroup in runs of 16");
  }
  // shift.comp reads and writes quads of channels as 16-byte words.
  for (const uint32_t at : {a.D, a.x_off, a.out_off, a.out_stride, a.save_off, a.norm_w, a.norm_b,
                            a.lerp_off, a.state_row, a.slot_floats, a.commit_src, a.commit_row}) {
    if (at % 4 != 0) throw EngineError("vk shift: sizes and offsets must be multiples of 4");
  }
  if ((a.q8_mask != 0 || a.h16_mask != 0) && !prof_.features.subgroup_shuffle) {
    throw EngineError("vk shift: the int8 and fp16 forms need subgroup shuffles");
  }
  const Pipelines::Key key = shift_key(a.D);
  bind(cb, set, key, &a, sizeof(a));
  dispatch(cb, T, t_.row_slices ? row_quads(a.D) : 1, 1);
}

void Kernels::wkv(VkCommandBuffer cb, VkDescriptorSet set, const WkvArgs& args, uint32_t n_head,
                  uint32_t head_size, uint32_t n_seq, uint32_t T, uint32_t longest) {
  if (longest == 0) longest = T;
  if (head_size > 256 || (head_size & (head_size - 1)) != 0) {
    throw EngineError("vk wkv: head size must be a power of two <= 256");
  }
  const uint32_t lora_half = args.flags & (0xfu * kWkvLoraHalf);
  const bool lora = (args.flags & kWkvLora) != 0;
  if ((args.flags & ~(kWkvLayer0 | kWkvLora | kWkvYHalf | lora_half)) != 0 ||
      (lora_half != 0 && !lora)) {
    throw EngineError("vk wkv: unknown flags");
  }
  const uint32_t lora_ranks = args.rank_w + args.rank_a + args.rank_v + args.rank_g;
  if (lora && !wkv_fuses_lora(head_size, lora_ranks)) {
    throw EngineError("vk wkv: the LoRA up products need the subgroup kernel");
  }
  const bool y_half = (args.flags & kWkvYHalf) != 0;
  if (y_half && (!wkv_writes_h16(head_size, longest) || args.y_q8 == kNoQ8)) {
    throw EngineError("vk wkv: this kernel cannot write the fp16 form of y");
  }
  if (args.y_q8 != kNoQ8 && !y_half && !wkv_writes_q8(head_size)) {
    throw EngineError("vk wkv: this kernel cannot write the int8 form of y");
  }
  WkvArgs a = args;
  a.n_seq = n_seq;
  uint32_t groups = n_seq;
  if (wkv_sg(head_size)) {
    // Sequences of one token each (T == n_seq: every sequence of a chunk has at least one) share
    // a workgroup per head in groups (wkv_sg.comp GROUPS), which load the LoRA up weights once:
    // two groups, at most Tuning::wkv_group sequences each.
    const uint32_t group = std::min({t_.wkv_group, ceil_div(n_seq, 2), kWkvBlock});
    const bool grouped = lora && T == n_seq && group > 1;
    if (grouped) {
      a.flags |= group << 8;
      groups = ceil_div(n_seq, group);
    }
    // A long chunk: wkv_long.comp (each head's state rows maybe over several workgroups), then
    // wkv_out.comp for the GroupNorm, bonus and gate (which need all of a head's rows).
    const bool long_chunk = !lora && longest >= t_.wkv_long_t;
    const Pipelines::Key pipelined =
        long_chunk && (args.y_q8 == kNoQ8 || y_half) ? wkv_long_key(head_size) : Pipelines::Key{};
    if (!pipelined.first.empty()) {
      const uint32_t slices = wkv_slices(n_head, head_size, n_seq);
      a.flags |= slices << 16;
      bind(cb, set, pipelined, &a, sizeof(a));
      dispatch(cb, n_head, n_seq, slices);
      compute_barrier(cb);
      bind(cb, set, {"wkv_out", {head_size, head_size}}, &a, sizeof(a));
      dispatch(cb, n_head, T, 1);
      return;
    }
    const Pipelines::Key key = wkv_key(head_size, longest, lora, lora_ranks, grouped);
    bind(cb, set, key, &a, sizeof(a));
  } else {
    bind(cb, set, {"wkv", {head_size, head_size}}, &a, sizeof(a));
  }
  dispatch(cb, n_head, groups, 1);
}

bool Kernels::wkv_writes_q8(uint32_t head_size) const {
  return wkv_sg(head_size) && head_size % 16 == 0;
}

bool Kernels::wkv_writes_h16(uint32_t head_size, uint32_t longest) const {
  // wkv_sg.comp writes it at any T; a long chunk that wkv_long.comp takes has wkv_out.comp write
  // it, pairing neighbouring channels by shuffles.
  const bool on_long = longest >= t_.wkv_long_t && !wkv_long_key(head_size).first.empty();
  return wkv_sg(head_size) && (!on_long || prof_.features.subgroup_size % 2 == 0);
}

bool Kernels::out_ln_sg() const {
  return prof_.features.subgroup_arith && prof_.features.subgroup_shuffle;
}

Pipelines::Key Kernels::out_ln_key(uint32_t D) const {
  return {out_ln_sg() ? "out_ln_sg" : "out_ln", {row_wg_, row_quads(D)}};
}

bool Kernels::out_ln_writes_q8(uint32_t D) const {
  return out_ln_sg() && D % 16 == 0 && row_wg_ % 16 == 0;
}

void Kernels::out_ln(VkCommandBuffer cb, VkDescriptorSet set, const OutLnArgs& a) {
  // out_ln.comp reads and writes quads of channels as 16-byte words.
  for (const uint32_t at : {a.D, a.x_off, a.embd_off, a.norm_w, a.norm_b}) {
    if (at % 4 != 0) throw EngineError("vk out_ln: sizes and offsets must be multiples of 4");
  }
  if (a.q8_off != kNoQ8 && !out_ln_writes_q8(a.D)) {
    throw EngineError("vk out_ln: this kernel cannot write the int8 form of its rows");
  }
  const Pipelines::Key key = out_ln_key(a.D);
  bind(cb, set, key, &a, sizeof(a));
  dispatch(cb, std::max(a.n_out, a.n_seq), 1, 1);
}

void Kernels::argmax(VkCommandBuffer cb, VkDescriptorSet set, uint32_t n, uint32_t rows,
                     uint32_t src, uint32_t dst) {
  if (n == 0 || rows == 0) throw EngineError("vk argmax: n > 0 and rows > 0 required");
  const uint32_t pc[4] = {n, kArgmaxPart, src, dst};
  bind(cb, set, {"argmax", {kArgmaxWg}}, pc, sizeof(pc));
  dispatch(cb, argmax_parts(n), rows, 1);
}

uint32_t Kernels::argmax_parts(uint32_t n) {
  return ceil_div(n, kArgmaxPart);
}

int32_t Kernels::argmax_of_parts(const uint32_t* pairs, uint32_t parts, float* best_out) {
  float best = -std::numeric_limits<float>::infinity();
  uint32_t at = UINT32_MAX;  // no part had a value but NaN
  for (uint32_t p = 0; p < parts; ++p) {
    const float v = std::bit_cast<float>(pairs[2 * p]);
    const uint32_t i = pairs[2 * p + 1];
    if (i != UINT32_MAX && (v > best || (v == best && i < at))) {
      best = v;
      at = i;
    }
  }
  if (best_out != nullptr) *best_out = best;
  return at == UINT32_MAX ? 0 : static_cast<int32_t>(at);
}

void Kernels::compute_barrier(VkCommandBuffer cb) {
  if (pipes_ == nullptr) {
    log_.push_back({});
    return;
  }
  if (t_.full_barriers) return barrier(cb);
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Kernels::full_barrier(VkCommandBuffer cb) {
  if (pipes_ == nullptr) return log_.push_back({});
  barrier(cb);
}

void Kernels::host_barrier(VkCommandBuffer cb) {
  if (pipes_ == nullptr) return log_.push_back({});
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Kernels::copy(VkCommandBuffer cb, VkBuffer src, VkBuffer dst,
                   std::span<const VkBufferCopy> regions) {
  if (pipes_ == nullptr)
    return log_.push_back({{"copy", {}}, static_cast<uint32_t>(regions.size())});
  vkCmdCopyBuffer(cb, src, dst, static_cast<uint32_t>(regions.size()), regions.data());
}

Kernels Kernels::plan_only() const {
  Kernels k = *this;
  k.pipes_ = nullptr;
  k.dispatches_ = 0;
  k.log_.clear();
  return k;
}

void Kernels::barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                       &mb, 0, nullptr, 0, nullptr);
}

}  // namespace rwkvd::engine::vk
