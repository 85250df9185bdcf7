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
// mvf.comp products of at least this many weights take 4 subgroups a row (mvf_key()).
constexpr uint64_t kMvfLargeWeights = uint64_t{16} << 20;
constexpr uint32_t kWkvBlock = 8;  // wkv_sg.comp TB: tokens per block (a multiple of 4)
// Row slices of wkv_long.comp: at most 8 (8 rows, 32 invocations of phase B, for head size 64),
// and at least 4 rows each; by default at most 2 (H100, Q4_K_M, doc state ms at 1 / 2 / 4 / 8
// slices, measured on wkv_sg.comp's long variant: 0.1B 11.2 / 9.0 / 9.3 / 9.4, 1.5B 41.9 / 38.4 /
// 38.1 / 46.4, 2.9B 70.8 / 64.8 / 77.7 / 88.0; each slice repeats phase A, and past 2 phase B no
// longer shortens much).
constexpr uint32_t kWkvMostSlices = 8, kWkvSliceRows = 4, kWkvDefaultSlices = 2;
constexpr uint32_t kWkvRowLanes = 4;  // wkv_core.glsl P: invocations per state row in phase B
// Workgroups a long chunk's wkv may make by splitting its heads' rows: no more than an H100's or
// H200's 132 SMs hold one at a time (a second wave doubles the time of the SMs that take two).
constexpr uint32_t kWkvSliceGrid = 128;
// wkv_sg.comp LL: weight vec4 a lane of its LoRA up phase holds at most (registers).
constexpr uint32_t kWkvLoraLoadsMax = 40;
// mvf.comp's largest workgroup (common.glsl kMaxWg: its team sums hold kMaxWg / 4 subgroups),
// and the rows from which a product has rows enough to spread over the GPU (mvf_key()).
constexpr uint32_t kMvfMostWg = 256, kMvfManyRows = 1024;
// From this many inputs a row of a product of few float rows is one subgroup's (few_rows_team()).
constexpr uint32_t kMvfOneSubgroupK = 2048;
constexpr uint32_t kQ8Wg = 64;                                    // q8.comp workgroup
constexpr uint32_t kArgmaxWg = 256, kArgmaxPart = 4 * kArgmaxWg;  // argmax.comp: one pass a part
constexpr uint32_t kH16Wg = 64;                                   // h16.comp workgroup
constexpr uint32_t kMcStepK = 64;       // mc.comp's K per step (BK), mcd.comp's too
constexpr uint32_t kMcPieceK = 32;      // mc.comp's float rows: K a multiple of its pieces
constexpr uint32_t kModeHalfOnly = 16;  // product.glsl: MmSlot::y_half_only
constexpr uint32_t kMcSumWg = 256;      // mc_sum.comp workgroup
constexpr uint32_t kMcdRows = 16, kMcdTokens = 16;  // mcd.comp BM, BT
constexpr uint32_t kMcdMostSubgroups = 8;           // mcd.comp kMaxSubgroups
// mc_split() doubles the parts (up to kMcSplitMost) while a product's row tiles (of 64) times
// its parts stay below this: 2560 outputs (40 tiles) in 2, the LoRA down products (5 tiles) in
// 8, r/k/v (3 x 40) and 10240 outputs not at all. H100, 512 tokens, fp16 inputs, 1 / 2 / 4
// parts: Q4_K 10240 -> 2560 323 / 277 / 283 us, 2560 -> 2560 79 / 75 / 88; Q6_K 10240 -> 2560
// 462 / 405 / 386; 2560 -> 10240 (160 tiles) 224 / 253 / 285.
constexpr uint32_t kMcSplitTiles = 64, kMcSplitMost = 8;
// Such a product with long rows splits further, until each part has at most this many steps of
// K: the ffn value product (10240 inputs, 160 steps) in 4. H100, Q4_K 10240 -> 2560 from fp16
// inputs, 2 / 4 parts, us: T 256 165 / 139, T 512 265 / 227, T 854 425 / 395, T 1024 432 /
// 444 (session 16; 2560 -> 2560, 40 steps, stays at 2: T 512 73.6 / 68.8 but T 1024 119 / 136).
constexpr uint32_t kMcSplitSteps = 40;

struct MmPush {
  uint32_t K[4], N[4], x_off[4], y_off[4], mode[4], row_bytes[4], yq_off[4];
  uint32_t T;
  uint32_t ksplit = 1, part_off = 0, part_width = 0;  // mc.comp split-K
};
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

uint32_t env_u32(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<uint32_t>(std::strtoul(v, nullptr, 10))
                                    : fallback;
}

// mv.comp's tokens per workgroup for T tokens: the smallest of 1, 2, 4, 8 that holds them.
// Capped at `cap` (Kernels::mv_tt_max_).
uint32_t mv_tokens(uint32_t T, uint32_t cap) {
  const uint32_t tt = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : 8;
  return std::min(tt, cap);
}

// mv.comp's staged chunk of K: one 32-weight piece per lane of a subgroup.
uint32_t mv_chunk(const Device& dev) {
  return 32 * dev.features().subgroup_size;
}

// Bytes of shared memory mv.comp stages for tt tokens (its xs array).
uint32_t mv_shared_bytes(const Device& dev, uint32_t tt) {
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

Kernels::Kernels(Device& dev, Pipelines& pipes) : dev_(dev), pipes_(pipes) {
  wg_ = std::min<uint32_t>(64, dev.props().limits.maxComputeWorkGroupSize[0]);
  // Row kernels run one workgroup per token: at batch 1 that workgroup is the whole dispatch,
  // so it gets many invocations (64 left a 2.9B decode waiting ~90 us per shift on latency).
  row_wg_ = std::min<uint32_t>(256, dev.props().limits.maxComputeWorkGroupSize[0]);
  // A CPU implementation (lavapipe) pays per workgroup: let each loop over many rows.
  if (dev.props().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    wg_ = 16;
    row_wg_ = 16;
    row_slices_ = false;
    max_row_groups_ = 4;
  }
  // A cap on the row kernels' grids (their workgroups loop over the rest): what the products
  // of a persistent kernel, with one workgroup or two an SM, would cost (comparisons only).
  if (const uint32_t cap = env_u32("RWKVD_VK_MAX_ROW_GROUPS", 0); cap > 0) max_row_groups_ = cap;
  mt_min_t_ = env_u32("RWKVD_VK_MT_MIN_T", 9);
  // (Their producers, the shifts, write the fp16 and int8 forms with shuffles.)
  coopmat_ = dev.features().coopmat && dev.features().subgroup_shuffle;
  half_inputs_ = env_u32("RWKVD_VK_HALF_INPUTS", 1) != 0;
  // F16 weights on tensor cores from split inputs (mc.comp MC_SPLIT); 0: the fp32 mt.comp.
  f16_split_ = env_u32("RWKVD_VK_F16_SPLIT", 1) != 0;
  mc_small_grid_ = env_u32("RWKVD_VK_MC_SMALL_GRID", 256);
  mc_rows_ = env_u32("RWKVD_VK_MC_ROWS", 0);      // 64 or 128 forces a tile height; 0: mc_rows()
  mc_tokens_ = env_u32("RWKVD_VK_MC_TOKENS", 0);  // 32 or 64 forces a tile width; 0: by grid
  mc_split_ = env_u32("RWKVD_VK_MC_SPLIT", 0);
  mcd_min_t_ = std::max(1u, env_u32("RWKVD_VK_MCD_MIN_T", mcd_min_t_));
  mcd_max_t_ = std::min(kMcdTokens, env_u32("RWKVD_VK_MCD_MAX_T", mcd_max_t_));
  mcd_sg_ = std::clamp(env_u32("RWKVD_VK_MCD_SG", mcd_sg_), 1u, kMcdMostSubgroups);
  mcd_split_ = env_u32("RWKVD_VK_MCD_SPLIT", 0);
  q6_head_int8_max_ = env_u32("RWKVD_VK_Q6_HEAD_INT8_MAX", q6_head_int8_max_);
  mvq_many_rows_ = env_u32("RWKVD_VK_MVQ_MANY_ROWS", mvq_many_rows_);
  wkv_portable_ = std::getenv("RWKVD_VK_WKV_PORTABLE") != nullptr;
  // Invocations per channel in wkv's LoRA up phase (more where the ranks need it): H100, 2.9B
  // Q4_K_M decode, see docs/PERFORMANCE.md.
  wkv_lanes_ = std::bit_floor(std::clamp(env_u32("RWKVD_VK_WKV_LANES", 8), 4u, 16u));
  // Decode of several sequences: how many at most share one of wkv's workgroups per head (1: each
  // its own), see wkv(); no more than wkv_sg.comp's block of tokens.
  wkv_group_ = std::clamp(env_u32("RWKVD_VK_WKV_GROUP", 4), 1u, kWkvBlock);
  wkv_slices_ = std::bit_floor(std::min(env_u32("RWKVD_VK_WKV_SLICES", 0), kWkvMostSlices));
  wkv_pipelined_ = env_u32("RWKVD_VK_WKV_PIPELINED", 1) != 0;
  if (const char* d = std::getenv("RWKVD_VK_WKV_DIAG");
      d != nullptr && (d == std::string("a") || d == std::string("b") || d == std::string("l"))) {
    wkv_diag_ = d;
  }
  if (const char* d = std::getenv("RWKVD_VK_MVQ_DIAG");
      d != nullptr && std::string("acdeq").find(d) != std::string::npos && std::strlen(d) == 1) {
    mvq_diag_ = d;
  }
  // Long chunks (prefill): more tokens per pass of wkv's parallel phases and per block, each pass
  // a memory latency and barriers (H100, see docs/PERFORMANCE.md). $RWKVD_VK_WKV_LONG_* override.
  // (Not on CPU devices, where the idle invocations of a wider workgroup cost time.)
  wkv_long_t_ = env_u32("RWKVD_VK_WKV_LONG_T",
                        dev.props().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? UINT32_MAX : 33);
  wkv_long_lanes_ = std::bit_floor(std::clamp(env_u32("RWKVD_VK_WKV_LONG_LANES", 16), 4u, 16u));
  wkv_long_block_ = std::clamp(env_u32("RWKVD_VK_WKV_LONG_BLOCK", 16), 4u, 32u) / 4 * 4;
  wkv_fuse_lora_ = env_u32("RWKVD_VK_FUSE_LORA", 1) != 0;
  shift_front_ = env_u32("RWKVD_VK_SHIFT_IN_FRONT", 1) != 0;
  ffn_front_most_k_ = env_u32("RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K", ffn_front_most_k_);
  att_front_most_k_ = env_u32("RWKVD_VK_ATT_SHIFT_IN_FRONT_MAX_K", att_front_most_k_);
  // $RWKVD_VK_ROW_SLICES=0|1 overrides the choice (tests run both on lavapipe).
  if (const char* v = std::getenv("RWKVD_VK_ROW_SLICES"); v != nullptr && *v != '\0') {
    row_slices_ = *v == '1';
  }
  if (dev.features().subgroup_arith) {
    // Up to 16 tokens: from 32 on tensor cores are faster (H100, 2.9B Q4_K_M gen-32 801 ->
    // 1161 tok/s at 16), and 8 gains nothing.
    mv_max_t_ = env_u32("RWKVD_VK_MV_MAX_T", 16);
    // One token: 64 invocations (nothing is staged; H100 vk_kernel_bench at the 2.9B shapes,
    // F16 2560 -> 10240: 26 us at 64, 33 us at 128). Several: 128, four subgroups share each
    // staged input chunk (10-30% faster than 64 at 4-8 tokens; 256 leaves too few workgroups
    // for 2560 rows). $RWKVD_VK_MV_WG sets both.
    const bool cpu = dev.props().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const uint32_t sg = dev.features().subgroup_size;
    mv_wg_one_ = std::max(sg, env_u32("RWKVD_VK_MV_WG", wg_));
    mvq_wg_ = std::max(sg, env_u32("RWKVD_VK_MVQ_WG", mv_wg_one_));  // mvq.comp's, any T
    mv_wg_ = std::max(sg, env_u32("RWKVD_VK_MV_WG", cpu ? wg_ : 128u));
    mv_rows_ = std::clamp(env_u32("RWKVD_VK_MV_ROWS", 0), 0u, 4u);
    mvq_pieces_ = std::clamp(env_u32("RWKVD_VK_MVQ_PIECES", 2), 1u, 8u);
    mvq_ksplit_ = env_u32("RWKVD_VK_MVQ_KSPLIT", 0);
    mvf_ = env_u32("RWKVD_VK_MVF", 1) != 0;
    mvf_wg_ = env_u32("RWKVD_VK_MVF_WG", cpu ? wg_ : 0);
    if (mvf_wg_ > 0) mvf_wg_ = std::max(sg, std::bit_floor(std::min(mvf_wg_, kMvfMostWg)));
    mvf_words_ = std::min(env_u32("RWKVD_VK_MVF_WORDS", 0), 8u);  // 0: by the shape (mvf_key)
    mvf_rows_ = std::min(env_u32("RWKVD_VK_MVF_ROWS", 0), 4u);
    mvf_ks_ = env_u32("RWKVD_VK_MVF_KS", 0);
    // At most 4 tokens per workgroup ($RWKVD_VK_MV_TT_MAX: 1, 2, 4 or 8): 8 need so many
    // registers that fewer warps fit (H100, before the staging: 2.9B Q4_K_M gen-8 494 -> 536
    // tok/s at 4), and no more than the staged inputs' shared memory allows.
    mv_tt_max_ = std::bit_floor(std::clamp(env_u32("RWKVD_VK_MV_TT_MAX", 4), 1u, 8u));
    while (mv_tt_max_ > 1 &&
           mv_shared_bytes(dev, mv_tt_max_) > dev.props().limits.maxComputeSharedMemorySize) {
      mv_tt_max_ /= 2;
    }
  }
}

void Kernels::warm(std::span<const GgmlType> types, uint32_t n_embd, uint32_t head_size,
                   uint32_t lora_ranks, GgmlType head) {
  std::vector<Pipelines::Key> keys;
  for (GgmlType t : types) {
    const std::string ts = weight_type_suffix(t);
    keys.push_back({subgroup_variant("mm_" + ts), {wg_, kTokenTile}});
    keys.push_back({"mt_" + ts, {}});
    // F32: MmSlot::half_ok; F16: inputs split in two halves (mc.comp MC_SPLIT).
    if (coopmat_ && (!is_float_type(t) || t == GgmlType::F32 || splits_inputs(t))) {
      for (const uint32_t rows : {64u, 128u}) {
        if (rows != mc_rows(t, 0, 0, 0, 1) && (mc_rows_ != 0 || t != GgmlType::Q4_K)) continue;
        // The forward's products read the fp16 form of their inputs, but for the LoRA up ones
        // (F32, float inputs) and the head: only the variants it uses (each costs start-up
        // time when no pipeline cache has it; one made on first use cost the H100 150 ms in
        // the middle of a 32-sequence step).
        for (const bool x16 : {false, true}) {
          if (x16 ? !half_inputs_ || splits_inputs(t)
                  : half_inputs_ && t != GgmlType::F32 && t != head && !splits_inputs(t)) {
            continue;
          }
          if (mc_tokens_ == 32 || mc_tokens_ == 64) {
            keys.push_back(mc_key(t, rows, mc_tokens_, x16));
            continue;
          }
          keys.push_back(mc_key(t, rows, kTileTokens, x16));
          keys.push_back(mc_key(t, rows, 32, x16));
        }
      }
    }
    if (mcd_on() && (!is_float_type(t) || splits_inputs(t))) keys.push_back(mcd_key(t));
    if (mv_max_t_ > 0) {
      // The token tiles mv_tokens() can pick, no more: each pipeline costs start-up time.
      for (uint32_t tt = 1; tt <= mv_tokens(mv_max_t_, mv_tt_max_); tt *= 2) {
        keys.push_back(mv_key(t, tt, mv_rows()));
        if (reads_q8(t, tt)) keys.push_back(mvq_key(t, tt));
        if (reads_q8(t, tt) && mvq_rows(tt, mvq_many_rows_) != mvq_rows(tt)) {
          keys.push_back(mvq_key(t, tt, false, mvq_many_rows_));  // a head's
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
    if (mv_max_t_ > 0 && mvf_ && is_float_type(t)) {  // the shapes mvf_key() tells apart
      for (const uint64_t w : {uint64_t{1}, kMvfLargeWeights}) {
        for (const uint32_t n : {1u, kMvfManyRows}) {
          // (Few rows: the LoRA down products' inputs, n_embd, and short ones, the LoRA up's.)
          for (const uint32_t k : {n_embd, 32u}) keys.push_back(mvf_key(t, n, w, k));
        }
      }
      MmSlot probe{n_embd, 16, 0, 0, MmMode::kStore, 16};
      if (runs_shift_in_front(t, {&probe, 1})) keys.push_back(mvf_ln_key(t, n_embd));
    }
    keys.push_back({"embed_" + ts, {row_wg_}});
  }
  if (dev_.features().int_dot) keys.push_back({"q8", {kQ8Wg}});
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
    if (wkv_long_t_ != UINT32_MAX) {
      keys.push_back(wkv_key(head_size, wkv_long_t_, false, 0));
      if (const Pipelines::Key k = wkv_long_key(head_size); !k.first.empty()) keys.push_back(k);
      keys.push_back({"wkv_out", {head_size, head_size}});
    }
    if (lora_ranks > 0 && wkv_fuses_lora(head_size, lora_ranks)) {
      keys.push_back(wkv_key(head_size, 1, true, lora_ranks));
      if (wkv_group_ > 1) keys.push_back(wkv_key(head_size, 1, true, lora_ranks, true));
    }
  } else {
    keys.push_back({"wkv", {head_size, head_size}});
  }
  pipes_.prepare(keys);
}

// Rows per subgroup: 2, so each lane has twice the loads in flight and each decoded x meets two
// rows. H100, vk_kernel_bench: Q4_K 2560 -> 10240 at one token 19.4 -> 16.5 us (rows 4: 21.2);
// 2.9B Q4_K_M gen-8 +13%, gen-32 +29% over one row.
// (F16 at one token took 4 rows for large products, 2560 -> 10240 31.1 -> 28.3 us, until
// mvf.comp took float weights at one token: 21.7.)
uint32_t Kernels::mv_rows() const {
  return mv_rows_ > 0 ? mv_rows_ : 2;
}

// mvq.comp's rows per subgroup: one at one token (H100 vk_kernel_bench, int8 inputs, one row
// against two: Q4_K 2560 -> 10240 13.6 -> 12.5 us, 10240 -> 2560 13.7 -> 12.0, 2560 -> 2560 7.0
// -> 6.1; Q6_K 10240 -> 2560 22.7 -> 17.2), two for several tokens (each decoded piece then meets
// twice the tokens' sums: Q4_K 2560 -> 10240 at 8 tokens 34 us against 40 with one row). A head
// (mvq_many_rows_ rows and more) takes four at one token: each subgroup's reduction and stores
// then serve four rows (H200, Q6_K 65536 x 768, 0.1B's head, whose rows are one step of a
// subgroup: 31.0 us with one row, 26.2 with two, 24.2 with four; 0.1B's own products lose with
// more: 3072 -> 768 4.90 -> 6.85 / 9.60).
uint32_t Kernels::mvq_rows(uint32_t tokens, uint32_t n) const {
  if (mv_rows_ > 0) return mv_rows_;
  if (tokens > 1) return 2;
  return n >= mvq_many_rows_ ? 4 : 1;
}

uint32_t Kernels::row_groups(uint32_t max_n, uint32_t rows) const {
  return std::min(
      {ceil_div(max_n, rows), dev_.props().limits.maxComputeWorkGroupCount[0], max_row_groups_});
}

uint32_t Kernels::mv_wg(uint32_t tokens) const {
  return tokens == 1 ? mv_wg_one_ : mv_wg_;
}

std::string Kernels::subgroup_variant(const std::string& shader) const {
  return dev_.features().subgroup_arith ? shader + "_sg" : shader;
}

Pipelines::Key Kernels::mv_key(GgmlType type, uint32_t tt, uint32_t rows) const {
  return {"mv_" + weight_type_suffix(type), {mv_wg(tt), tt, rows, mv_chunk(dev_)}};
}

bool Kernels::takes_mvf(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const {
  return mvf_ && T == 1 && is_float_type(type) &&
         std::all_of(slots.begin(), slots.end(), [](const MmSlot& s) {
           return s.row_bytes % 16 == 0 && s.x_off % 4 == 0 && s.yq_off == kNoQ8;
         });
}

// A row's team and the workgroup: products of few rows (the LoRA down products' 576) take
// workgroups of 64 and two subgroups a row; others 128 and two subgroups a row, four for large
// products (their rows are long, or many wait their turn). H100, vk_kernel_bench, us, mv.comp
// against mvf.comp with 1 / 2 / 4 subgroups a row: F16 2560 -> 10240 28.2 / 23.5 / 22.3 / 21.7,
// 10240 -> 2560 25.3 / 32.7 / 25.0 / 24.9, 2560 -> 2560 9.9 / 8.6 / 8.4 / 9.2; F32 2560 -> 576 9.4
// -> 5.7 (four) and beside the Q4_K r/k/v product of the same step 22.0 -> 15.6 (workgroups of
// 64: 13.2).
//
// F16 products of many rows take two rows a subgroup and two words a lane in flight for each
// (H200, vk_kernel_bench, us, words 4 and one row against two and two: F16 10240 -> 2560 21.4 ->
// 16.3, 2560 -> 10240 17.4 -> 17.3, 2560 -> 2560 7.56 -> 7.31; F32 10240 -> 2560 28.5 -> 28.1 but
// 2560 -> 10240 27.5 -> 28.6 and 2560 -> 2560 9.63 -> 9.99, the F32 LoRA down 5.95 -> 8.37, so
// those keep one row and 4 words; bench/results/2026-11-28-s24/mvf-knobs/). A lane's sums run in
// the same order either way.
Pipelines::Key Kernels::mvf_key(GgmlType type, uint32_t max_n, uint64_t weights, uint32_t K) const {
  const bool few = max_n < kMvfManyRows, pairs = type == GgmlType::F16 && !few;
  const uint32_t wg =
      mvf_wg_ > 0 ? mvf_wg_ : std::max(dev_.features().subgroup_size, few ? 64u : 128u);
  uint32_t ks = few                           ? few_rows_team(type, K)  // (it heeds mvf_ks_)
                : mvf_ks_ > 0                 ? mvf_ks_
                : weights >= kMvfLargeWeights ? 4
                                              : 2;
  ks = std::bit_floor(std::clamp(ks, 1u, wg / dev_.features().subgroup_size));
  return {"mvf_" + weight_type_suffix(type),
          {wg, mvf_words(pairs ? 2 : 4), mvf_rows(pairs ? 2 : 1), ks}};
}

uint32_t Kernels::mvf_words(uint32_t by_shape) const {
  return mvf_words_ > 0 ? mvf_words_ : by_shape;
}

uint32_t Kernels::mvf_rows(uint32_t by_shape) const {
  return mvf_rows_ > 0 ? mvf_rows_ : by_shape;
}

// mvq.comp stages nothing, so its workgroup is the one-token size for any number of tokens;
// the variant that writes its output's int8 form takes 16 rows a workgroup (whole runs).
Pipelines::Key Kernels::mvq_key(GgmlType type, uint32_t tt, bool qout, uint32_t n) const {
  return {(mvq_diag_.empty() ? "mvq_" : "mvq_diag_" + mvq_diag_ + "_") + weight_type_suffix(type),
          {qout ? mvq_qout_wg(tt) : mvq_wg_, tt, mvq_rows(tt, qout ? 0 : n), mvq_pieces_,
           qout ? 1u : 0u}};
}

uint32_t Kernels::row_quads(uint32_t D) const {
  return std::max(1u, ceil_div(D / 4, row_wg_));
}

// The _sg variant needs shuffles (the int8 form's runs); the other writes neither form.
Pipelines::Key Kernels::shift_key(uint32_t D) const {
  return {dev_.features().subgroup_shuffle ? "shift_sg" : "shift", {row_wg_, row_quads(D)}};
}

uint32_t Kernels::mvq_qout_wg(uint32_t tokens) const {
  return 16 / mvq_rows(tokens) * dev_.features().subgroup_size;
}

// Products with the shift in front: the shift's lanes and quads a lane (LNL, LNQ) are
// shift.comp's, so that its sums run in the same order, and the workgroup holds at least those
// lanes; KMAX sizes the shared input.
Pipelines::Key Kernels::mvq_ln_key(GgmlType type, uint32_t K, bool qout) const {
  const uint32_t wg = qout ? mvq_qout_wg(1) : std::max(mvq_wg_, row_wg_);
  return {"mvq_ln_" + weight_type_suffix(type),
          {wg, 1, mvq_rows(1), mvq_pieces_, qout ? 1u : 0u, row_wg_, row_quads(K), K}};
}

// Subgroups a row of a product of few float rows (the LoRA down products) with K inputs, in front
// of the shift or not (the same team, so the same sums): one for F32 rows from 2048 inputs (the
// LoRA weights of quantised files; F16 ones were not measured), else two. H200, rwkvd bench gen-1
// tok/s, two subgroups / one, alternating in one call (bench/results/2026-11-29-s27/mvf-ks/:
// the knob's call, then this rule's build against the one before): 2.9B Q4_K_M (2560 inputs)
// 463, 460 / 466, 449 and 450, 450, 460 / 466, 468, 465; 1.5B (2048, the shift in front) 657,
// 660 / 702, 682 and 641, 686, 674 / 674, 680, 668. Small (+1.4% and +2.7% over the five
// rounds), within a round's noise, never a loss on the mean.
uint32_t Kernels::few_rows_team(GgmlType type, uint32_t K) const {
  return mvf_ks_ > 0 ? mvf_ks_ : type == GgmlType::F32 && K >= kMvfOneSubgroupK ? 1u : 2u;
}

Pipelines::Key Kernels::mvf_ln_key(GgmlType type, uint32_t K) const {
  const uint32_t sg = dev_.features().subgroup_size, wg = std::max(row_wg_, sg);
  const uint32_t ks = std::bit_floor(std::clamp(few_rows_team(type, K), 1u, wg / sg));
  return {"mvf_ln_" + weight_type_suffix(type),
          {wg, mvf_words(4), mvf_rows(1), ks, row_wg_, row_quads(K), K}};
}

bool Kernels::runs_shift_in_front(GgmlType type, std::span<const MmSlot> slots) const {
  if (!shift_front_ || slots.empty() || !dev_.features().subgroup_shuffle || row_wg_ % 16 != 0) {
    return false;
  }
  // (The ffn key product is the one that writes its output's int8 form.)
  const uint32_t K = slots[0].K;
  const bool qout = slots[0].yq_off != kNoQ8;
  for (const MmSlot& sl : slots) {
    if (sl.K != K || K > (qout ? ffn_front_most_k_ : att_front_most_k_) || K % 32 != 0) {
      return false;
    }
  }
  // The kernels mm() takes at one token: mvf.comp for float weights, mvq.comp for int8 inputs
  // (the int8 runs of the shift gather over four neighbouring lanes: its lanes come first).
  if (mv_max_t_ == 0 || few_on_coopmat(1)) return false;
  // Float products: only those of few rows (the LoRA down products). The shift needs workgroups of
  // shift.comp's 256 lanes, and large float products lose with them: 1.5B F16's r/k/v (2048 rows)
  // 508, 511 -> 490, 491 tok/s (H100, alternating); 0.1B F16 even (1629, 1494 / 1622, 1583).
  if (takes_mvf(type, slots, 1)) {
    return std::all_of(slots.begin(), slots.end(),
                       [](const MmSlot& s) { return s.N < kMvfManyRows; });
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
  const uint32_t sg = dev_.features().subgroup_size, subgroups = mvq_wg_ / sg;
  const uint32_t steps = K / 32 / (mvq_pieces_ * sg);
  uint32_t ks = mvq_ksplit_ > 0 ? mvq_ksplit_ : steps;
  ks = std::bit_floor(std::clamp(ks, 1u, subgroups));
  // mvq.comp's s_ks holds subgroups x rows x tokens partial sums, at most 256.
  return subgroups * mvq_rows(mv_tt_max_) * mv_tt_max_ <= 256 ? ks : 1;
}

bool Kernels::writes_q8(GgmlType type, uint32_t K, uint32_t N, uint32_t T) const {
  const uint32_t tt = mv_tokens(T, mv_tt_max_);
  // The variant that writes y's int8 form does not split K (its workgroups own 16 rows).
  return reads_q8(type, T) && mvq_ksplit(K) == 1 && N % 16 == 0 && 16 % mvq_rows(tt) == 0 &&
         mvq_qout_wg(tt) <= std::min({dev_.props().limits.maxComputeWorkGroupSize[0],
                                      dev_.props().limits.maxComputeWorkGroupInvocations, 1024u});
}

bool Kernels::reads_q8(GgmlType type, uint32_t T) const {
  return dev_.features().int_dot && dev_.features().subgroup_shuffle && mv_max_t_ > 0 &&
         T <= mv_max_t_ && has_int8_product(type);
}

void Kernels::quantize_q8(VkCommandBuffer cb, VkDescriptorSet set, uint32_t K, uint32_t T,
                          uint32_t x_off, uint32_t q_off) {
  if (K % 32 != 0 || T == 0) throw EngineError("vk quantize_q8: K % 32 == 0 and T > 0 required");
  const Q8Push pc{K, T, x_off, q_off};
  bind(cb, set, pipes_.get("q8", {kQ8Wg}), &pc, sizeof(pc));
  vkCmdDispatch(cb, ceil_div(K / 4, kQ8Wg), T, 1);
}

bool Kernels::reads_h16(GgmlType type, std::span<const MmSlot> slots, uint32_t T) const {
  return half_inputs_ && !splits_inputs(type) && !slots.empty() &&
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
  bind(cb, set, pipes_.get("h16", {kH16Wg}), &pc, sizeof(pc));
  vkCmdDispatch(cb, ceil_div(max_k / 8, kH16Wg), T, static_cast<uint32_t>(regions.size()));
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
  return typed && T > mv_max_t_ && T >= mt_min_t_;
}

bool Kernels::splits_inputs(GgmlType type) const {
  return type == GgmlType::F16 && f16_split_;
}

bool Kernels::mcd_on() const {
  return coopmat_ && half_inputs_ && mcd_max_t_ > 0;
}

bool Kernels::few_on_coopmat(uint32_t T) const {
  return mcd_on() && T >= mcd_min_t_ && T <= mcd_max_t_;
}

bool Kernels::head_on_coopmat(GgmlType type, uint32_t rows) const {
  return few_on_coopmat(rows) && !(type == GgmlType::Q6_K && rows <= q6_head_int8_max_);
}

Pipelines::Key Kernels::mcd_key(GgmlType type) const {
  // Split inputs take a third tile a subgroup: at most 4 subgroups fit mcd.comp's shared memory.
  const uint32_t sg = splits_inputs(type) ? std::min(mcd_sg_, 4u) : mcd_sg_;
  return {"mcd_" + weight_type_suffix(type), {32 * sg}};
}

Pipelines::Key Kernels::mc_key(GgmlType type, uint32_t rows, uint32_t tokens, bool x16) const {
  // Constant 0 (the workgroup size, fixed in the shader) keeps the ids in common.glsl's order.
  return {mc_name(type, rows, tokens), {2 * rows, x16 ? 1u : 0u}};
}

uint32_t Kernels::mc_split(std::span<const MmSlot> slots) const {
  const MmSlot& first = slots.front();
  if (first.part_off == kNoQ8 || mc_split_ == 1) return 1;
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
  // H100, 512 tokens, Q4_K: see docs/PERFORMANCE.md (session 9) for the products it splits.
  const uint32_t most = mc_split_ >= 2 ? std::min(mc_split_, kMcSplitMost) : kMcSplitMost;
  const bool few_tiles = tiles < kMcSplitTiles;
  const auto wants = [&](uint32_t split) {
    return mc_split_ >= 2 || tiles * split < kMcSplitTiles ||
           (few_tiles && steps / split > kMcSplitSteps);
  };
  uint32_t split = 1;
  while (split < most && wants(split) && divides(2 * split) &&
         2 * split * rows <= first.part_width) {
    split *= 2;
  }
  return split;
}

// mcd.comp steps of K (64 inputs) a subgroup keeps when its product is split: fewer leave
// each split part too little to hide the start of its workgroup.
constexpr uint32_t kMcdSplitMinSteps = 4;
// Split until a product makes as many workgroups as the ffn key product (640), which mcd.comp
// runs near its best per byte (H100, 8 tokens: Q4_K 2560 -> 10240 23.5 us, 10240 -> 2560 unsplit
// 34 us for the same bytes, docs/PERFORMANCE.md session 12).
constexpr uint32_t kMcdSplitTiles = 640;

uint32_t Kernels::mcd_split(std::span<const MmSlot> slots) const {
  const MmSlot& first = slots.front();
  if (first.part_off == kNoQ8 || mcd_split_ == 1) return 1;
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
  if (mcd_split_ >= 2) return fits(mcd_split_) ? mcd_split_ : 1;
  uint32_t split = 1;
  while (tiles * 2 * split <= kMcdSplitTiles &&
         steps / (2 * split) / mcd_sg_ >= kMcdSplitMinSteps && fits(2 * split)) {
    split *= 2;
  }
  return split;
}

std::string Kernels::mc_name(GgmlType type, uint32_t rows, uint32_t tokens) const {
  return "mc_" + weight_type_suffix(type) + (rows == 128 ? "_r128" : "") +
         (tokens == 32 ? "_t32" : "");
}

uint32_t Kernels::mc_rows(GgmlType type, uint32_t max_n, uint32_t T, uint32_t n_slots,
                          uint32_t split) const {
  if (splits_inputs(type)) return 64;  // a 128-row tile with two input tiles: too many registers
  if (mc_rows_ == 64 || mc_rows_ == 128) return mc_rows_;
  // 128-row tiles read the tokens' inputs half as often, but make half the workgroups (two an
  // SM fit, against four of 64 rows): they win from ~2.5 waves of them. H100, Q4_K from fp16
  // inputs, us with 64 / 128 rows (session 16; workgroups of 128 rows, split-K parts counted):
  //   2560 -> 10240 (no split): T 128 (160) 80 / 85, T 256 (320) 131 / 127, T 512 (640) 243 / 204
  //   10240 -> 2560 (2 parts): T 256 (160) 168 / 178, T 512 (320) 275 / 268, T 854 (560) 467 /
  //     429, T 1024 (640) 526 / 437
  //   2560 -> 2560 (2 parts): T 256 (160) 47.6 / 49.8, T 512 (320) 77 / 74, T 1024 (640) 139 / 120
  // Q6_K slower at every shape (its pieces cost more to decode), other types not measured. The
  // rows of a tile change no sum's order (each output's K runs the same steps in either).
  const uint32_t grid = ceil_div(max_n, 128) * ceil_div(T, kTileTokens) * n_slots * split;
  return type == GgmlType::Q4_K && grid >= 256 ? 128 : 64;
}

bool Kernels::wkv_sg(uint32_t head_size) const {
  const DeviceFeatures& f = dev_.features();
  return f.subgroup_shuffle && f.subgroup_size <= head_size && 4 * head_size <= 256 &&
         4 * head_size <= dev_.props().limits.maxComputeWorkGroupSize[0] && !wkv_portable_;
}

std::vector<std::string> Kernels::choices(uint32_t head_size) const {
  std::vector<std::string> out;
  if (dev_.features().subgroup_arith) {
    out.push_back("subgroup_size=" + std::to_string(dev_.features().subgroup_size));
  }
  if (mv_max_t_ > 0) out.push_back("decode_matvec");
  if (mv_max_t_ > 0 && mvf_) out.push_back("float_matvec");
  if (coopmat_) out.push_back("tensor_cores");
  if (coopmat_ && splits_inputs(GgmlType::F16)) out.push_back("tensor_cores_f16_split_inputs");
  if (mcd_on()) out.push_back("tensor_cores_decode");
  if (dev_.features().int_dot && mv_max_t_ > 0) {
    out.push_back(dev_.features().int_dot_fast ? "int8_decode" : "int8_decode_emulated");
  }
  out.push_back(wkv_sg(head_size) ? "wkv_subgroup" : "wkv_portable");
  return out;
}

Kernels::WkvLora Kernels::wkv_lora(uint32_t head_size, uint32_t lora_ranks) const {
  const uint32_t most = std::min(
      {dev_.features().subgroup_size, dev_.props().limits.maxComputeWorkGroupSize[0] / head_size,
       dev_.props().limits.maxComputeWorkGroupInvocations / head_size, 16u});
  const uint32_t smem = dev_.props().limits.maxComputeSharedMemorySize;
  for (uint32_t pl = wkv_lanes_; pl <= most; pl *= 2) {
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
  } else if (T >= wkv_long_t_) {
    const uint32_t most = std::min(dev_.props().limits.maxComputeWorkGroupSize[0],
                                   dev_.props().limits.maxComputeWorkGroupInvocations);
    lanes = std::max(4u, std::min(wkv_long_lanes_, std::bit_floor(most / head_size)));
    block = wkv_long_block_;
    while (block > kWkvBlock && wkv_shared_bytes(head_size, lanes, block, 0) >
                                    dev_.props().limits.maxComputeSharedMemorySize) {
      block -= 4;
    }
  }
  return {lora && wkv_diag_ == "l" ? "wkv_sg_diag_l" : "wkv_sg",
          {lanes * head_size, head_size, block, lanes, loads, staged, grouped ? 1u : 0u}};
}

// Twice phase B's invocations (the rest run phase A), and as many tokens a block (a multiple of
// 4, at most $RWKVD_VK_WKV_LONG_BLOCK) as two buffers of its six shared arrays leave room for.
Pipelines::Key Kernels::wkv_long_key(uint32_t head_size) const {
  const VkPhysicalDeviceLimits& lim = dev_.props().limits;
  const uint32_t sg = dev_.features().subgroup_size, wg = 2 * kWkvRowLanes * head_size;
  if (!wkv_pipelined_ || !wkv_sg(head_size) || sg > head_size || !dev_.features().subgroup_arith ||
      wg > std::min(lim.maxComputeWorkGroupSize[0], lim.maxComputeWorkGroupInvocations)) {
    return {};
  }
  const auto shared_bytes = [&](uint32_t block) { return 48 * block * head_size + 16 * 256; };
  uint32_t block = wkv_long_block_;
  while (block > 4 && shared_bytes(block) > lim.maxComputeSharedMemorySize) block -= 4;
  if (shared_bytes(block) > lim.maxComputeSharedMemorySize) return {};
  return {wkv_diag_ != "a" && wkv_diag_ != "b" ? "wkv_long" : "wkv_long_diag_" + wkv_diag_,
          {wg, head_size, block, sg}};
}

// Phase B of a long chunk is a chain of latencies per warp (docs/PERFORMANCE.md, session 15), and
// a head's 64 rows take 8 warps, two to each of an SM's four schedulers: with fewer (head,
// sequence) workgroups than SMs, each head's rows go to 2, 4 or 8 workgroups, whose redundant
// phase A runs on SMs that would otherwise idle, as long as they all fit one wave (2.9B: 4
// slices, 160 workgroups, lost to 2).
uint32_t Kernels::wkv_slices(uint32_t n_head, uint32_t head_size, uint32_t n_seq) const {
  // (wkv_long.comp: a slice's phase B takes whole subgroups.)
  const uint32_t most = std::min({kWkvMostSlices, head_size / kWkvSliceRows,
                                  kWkvRowLanes * head_size / dev_.features().subgroup_size});
  if (wkv_slices_ != 0) return std::min(wkv_slices_, most);
  uint32_t slices = 1;
  while (slices < std::min(most, kWkvDefaultSlices) &&
         n_head * n_seq * slices * 2 <= kWkvSliceGrid) {
    slices *= 2;
  }
  return slices;
}

bool Kernels::wkv_fuses_lora(uint32_t head_size, uint32_t lora_ranks) const {
  return wkv_sg(head_size) && wkv_fuse_lora_ && lora_ranks % 4 == 0 &&
         wkv_lora(head_size, lora_ranks).lanes != 0;
}

void Kernels::bind(VkCommandBuffer cb, VkDescriptorSet set, VkPipeline p, const void* pc,
                   uint32_t size) {
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_.layout(), 0, 1, &set, 0,
                          nullptr);
  vkCmdPushConstants(cb, pipes_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, size, pc);
  ++dispatches_;
}

void Kernels::mm(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type,
                 std::span<const MmSlot> slots, uint32_t T) {
  if (slots.empty() || slots.size() > kWeightBindings || T == 0) {
    throw EngineError("vk mm: 1..4 slots and T > 0 required");
  }
  if (slots[0].front.rec != kNoQ8 && (T != 1 || !runs_shift_in_front(type, slots))) {
    throw EngineError("vk mm: these products cannot run the shift in front");
  }
  MmPush pc{};
  uint32_t max_n = 0;
  bool qout = false;  // some slot wants its output's int8 form too
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
    max_n = std::max(max_n, s.N);
    if (s.yq_off != kNoQ8) {
      if (s.q8_off == kNoQ8 || !writes_q8(type, s.K, s.N, T)) {
        throw EngineError("vk mm: this product cannot write its output's int8 form");
      }
      qout = true;
    }
  }
  pc.T = T;
  bool k32 = true, coopmat = true;
  for (const MmSlot& sl : slots) {
    k32 = k32 && sl.K % 32 == 0;
    coopmat = coopmat && uses_coopmat(type, sl.K, T, sl.half_ok);
  }
  const bool hout =
      std::any_of(slots.begin(), slots.end(), [](const MmSlot& s) { return s.yh_off != kNoQ8; });
  if (hout && !writes_h16(type, slots, T)) {
    throw EngineError("vk mm: this product cannot write its output's fp16 form");
  }
  const auto n_slots = static_cast<uint32_t>(slots.size());
  // Tensor-core products: `key` over gx x gy workgroups a slot and part of K; with split-K parts
  // (mc_split, mcd_split) mc_sum.comp then adds their partial sums in order, through the
  // epilogue.
  const auto dispatch_parts = [&](const Pipelines::Key& key, uint32_t split, uint32_t gx,
                                  uint32_t gy) {
    if (split > 1) {
      pc.ksplit = split;
      pc.part_off = slots[0].part_off;
      pc.part_width = slots[0].part_width;
    }
    bind(cb, set, pipes_.get(key.first, key.second), &pc, sizeof(pc));
    vkCmdDispatch(cb, gx, gy, n_slots * split);
    if (split > 1) {
      compute_barrier(cb);
      bind(cb, set, pipes_.get("mc_sum", {kMcSumWg}), &pc, sizeof(pc));
      vkCmdDispatch(cb, ceil_div(T * max_n, kMcSumWg), n_slots, 1);
    }
  };
  // (F16 weights read the float inputs, which mcd.comp splits in two fp16 halves; like the fp16
  // forms' products, only with K a multiple of its 64-input steps: a LoRA up product of rank 32
  // would otherwise take none and come out 0.)
  const bool halves =
      splits_inputs(type) && std::all_of(slots.begin(), slots.end(), [&](const MmSlot& s) {
        return s.x_off % 8 == 0 && uses_coopmat(type, s.K, T);
      });
  if (k32 && !qout && few_on_coopmat(T) && (halves || reads_h16(type, slots, T))) {
    for (size_t i = 0; i < slots.size() && !halves; ++i) {
      pc.x_off[i] = slots[i].h16_off;
      pc.yq_off[i] = slots[i].yh_off;
    }
    dispatch_parts(mcd_key(type), mcd_split(slots), ceil_div(max_n, kMcdRows),
                   ceil_div(T, kMcdTokens));
    return;
  }
  if (k32 && T <= mv_max_t_ && takes_mvf(type, slots, T)) {
    uint64_t weights = 0;  // the largest slot's
    uint32_t k_max = 0;    // the longest row's
    for (const MmSlot& sl : slots) {
      weights = std::max<uint64_t>(weights, uint64_t{sl.K} * sl.N);
      k_max = std::max(k_max, sl.K);
    }
    const bool front = slots[0].front.rec != kNoQ8;
    const Pipelines::Key key =
        front ? mvf_ln_key(type, slots[0].K) : mvf_key(type, max_n, weights, k_max);
    if (front) set_front(slots, pc);
    bind(cb, set, pipes_.get(key.first, key.second), &pc, sizeof(pc));
    const uint32_t rows =
        key.second[0] / dev_.features().subgroup_size / key.second[3] * key.second[2];
    vkCmdDispatch(cb, row_groups(max_n, rows), 1, static_cast<uint32_t>(slots.size()));
    return;
  }
  if (k32 && T <= mv_max_t_) {
    const uint32_t tt = mv_tokens(T, mv_tt_max_);
    const bool q8 =
        reads_q8(type, T) &&
        std::all_of(slots.begin(), slots.end(), [](const MmSlot& s) { return s.q8_off != kNoQ8; });
    if (q8) {
      for (size_t i = 0; i < slots.size(); ++i) pc.x_off[i] = slots[i].q8_off;
    }
    if (q8 && !qout) {
      uint32_t k_min = UINT32_MAX;
      for (const MmSlot& sl : slots) k_min = std::min(k_min, sl.K);
      pc.ksplit = mvq_ksplit(k_min);
    }
    const uint32_t mv_r = mv_rows();
    const bool front = slots[0].front.rec != kNoQ8;
    if (front) {  // (int8 inputs: mm()'s check of runs_shift_in_front() above)
      set_front(slots, pc);
      pc.ksplit = 1;
    }
    const Pipelines::Key key = front ? mvq_ln_key(type, slots[0].K, qout)
                               : q8  ? mvq_key(type, tt, qout, max_n)
                                     : mv_key(type, tt, mv_r);
    bind(cb, set, pipes_.get(key.first, key.second), &pc, sizeof(pc));
    // Rows a workgroup: its subgroups (per part of K) times the pipeline's rows a subgroup
    // (specialization constant 2 of all three kernels).
    const uint32_t rows = key.second[0] / dev_.features().subgroup_size / pc.ksplit * key.second[2];
    vkCmdDispatch(cb, row_groups(max_n, rows), ceil_div(T, tt),
                  static_cast<uint32_t>(slots.size()));
    return;
  }
  if (k32 && T >= mt_min_t_) {  // (mv took every T <= mv_max_t_ above)
    if (coopmat) {
      // 32-token tiles where 64-token ones would leave the GPU short of invocations (a 128-row
      // workgroup has twice a 64-row one's: H100, 512 tokens, Q4_K 2560 -> 10240 on 128 rows,
      // 32 tokens 351 us, 64 tokens 263 us). Reading fp16 inputs, fewer workgroups suffice:
      // 10240 -> 2560 (320 of 64 tokens) 368 us on 32-token tiles, 320 us on 64; 2560 -> 2560
      // 83 -> 78 us (so the threshold went from 1024 to 256).
      // Q6_K takes 64-token tiles whenever it has 64 tokens: its pieces cost the most to decode,
      // and a wider tile decodes each for more tokens (10240 -> 2560 703 -> 609 us, 2560 -> 2560
      // 169 -> 153 us; Q4_K 2560 -> 2560 111 -> 117 us the other way).
      const uint32_t split = mc_split(slots);
      const uint32_t rows = mc_rows(type, max_n, T, n_slots, split);
      const uint32_t grid = ceil_div(max_n, rows) * ceil_div(T, kTileTokens) * n_slots * split;
      uint32_t tokens = grid * (rows / kTileRows) < mc_small_grid_ ? 32 : kTileTokens;
      if (type == GgmlType::Q6_K && T > 32) tokens = kTileTokens;
      if (mc_tokens_ == 32 || mc_tokens_ == 64) tokens = mc_tokens_;
      // The inputs' fp16 form where every slot has one (the forward writes it for its large
      // products): half the bytes of the reads that dominate mc.comp's traffic.
      const bool x16 = reads_h16(type, slots, T);
      if (x16) {
        for (size_t i = 0; i < slots.size(); ++i) {
          pc.x_off[i] = slots[i].h16_off;
          pc.yq_off[i] = slots[i].yh_off;
          if (slots[i].yh_off != kNoQ8 && slots[i].y_half_only) pc.mode[i] |= kModeHalfOnly;
        }
      }
      dispatch_parts(mc_key(type, rows, tokens, x16), split, ceil_div(max_n, rows),
                     ceil_div(T, tokens));
      return;
    }
    bind(cb, set, pipes_.get("mt_" + weight_type_suffix(type), {}), &pc, sizeof(pc));
    vkCmdDispatch(cb, ceil_div(max_n, kTileRows), ceil_div(T, kTileTokens), n_slots);
    return;
  }
  bind(cb, set, pipes_.get(subgroup_variant("mm_" + weight_type_suffix(type)), {wg_, kTokenTile}),
       &pc, sizeof(pc));
  // Rows per workgroup: one per subgroup, or one (workgroup reduction).
  const uint32_t rows =
      dev_.features().subgroup_arith ? std::max(1u, wg_ / dev_.features().subgroup_size) : 1u;
  vkCmdDispatch(cb, row_groups(max_n, rows), ceil_div(T, kTokenTile),
                static_cast<uint32_t>(slots.size()));
}

void Kernels::embed(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, const EmbedArgs& a,
                    uint32_t T) {
  bind(cb, set, pipes_.get("embed_" + weight_type_suffix(type), {row_wg_}), &a, sizeof(a));
  vkCmdDispatch(cb, T, 1, 1);
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
  if ((a.q8_mask != 0 || a.h16_mask != 0) && !dev_.features().subgroup_shuffle) {
    throw EngineError("vk shift: the int8 and fp16 forms need subgroup shuffles");
  }
  const Pipelines::Key key = shift_key(a.D);
  bind(cb, set, pipes_.get(key.first, key.second), &a, sizeof(a));
  vkCmdDispatch(cb, T, row_slices_ ? row_quads(a.D) : 1, 1);
}

void Kernels::wkv(VkCommandBuffer cb, VkDescriptorSet set, const WkvArgs& args, uint32_t n_head,
                  uint32_t head_size, uint32_t n_seq, uint32_t T) {
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
  if (y_half && (!wkv_writes_h16(head_size, T) || args.y_q8 == kNoQ8)) {
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
    // two groups (H100, 2.9B Q4_K_M, tok/s, a workgroup per sequence / groups of 2 / 4 / 8,
    // alternating, two rounds: gen-4 935, 922 / 954, 951 / 922, 916 / -; gen-8 1596, 1576 /
    // 1607, 1622 / 1672, 1662 / 1554, 1575), at most wkv_group_ sequences each.
    const uint32_t group = std::min({wkv_group_, ceil_div(n_seq, 2), kWkvBlock});
    const bool grouped = lora && T == n_seq && group > 1;
    if (grouped) {
      a.flags |= group << 8;
      groups = ceil_div(n_seq, group);
    }
    // A long chunk: wkv_long.comp (each head's state rows maybe over several workgroups), then
    // wkv_out.comp for the GroupNorm, bonus and gate (which need all of a head's rows).
    const bool long_chunk = !lora && T >= wkv_long_t_;
    const Pipelines::Key pipelined =
        long_chunk && (args.y_q8 == kNoQ8 || y_half) ? wkv_long_key(head_size) : Pipelines::Key{};
    if (!pipelined.first.empty()) {
      const uint32_t slices = wkv_slices(n_head, head_size, n_seq);
      a.flags |= slices << 16;
      bind(cb, set, pipes_.get(pipelined.first, pipelined.second), &a, sizeof(a));
      vkCmdDispatch(cb, n_head, n_seq, slices);
      compute_barrier(cb);
      bind(cb, set, pipes_.get("wkv_out", {head_size, head_size}), &a, sizeof(a));
      vkCmdDispatch(cb, n_head, T, 1);
      return;
    }
    const Pipelines::Key key = wkv_key(head_size, T, lora, lora_ranks, grouped);
    bind(cb, set, pipes_.get(key.first, key.second), &a, sizeof(a));
  } else {
    bind(cb, set, pipes_.get("wkv", {head_size, head_size}), &a, sizeof(a));
  }
  vkCmdDispatch(cb, n_head, groups, 1);
}

bool Kernels::wkv_writes_q8(uint32_t head_size) const {
  return wkv_sg(head_size) && head_size % 16 == 0;
}

bool Kernels::wkv_writes_h16(uint32_t head_size, uint32_t T) const {
  // wkv_sg.comp writes it at any T; a long chunk that wkv_long.comp takes has wkv_out.comp write
  // it, pairing neighbouring channels by shuffles.
  const bool on_long = T >= wkv_long_t_ && !wkv_long_key(head_size).first.empty();
  return wkv_sg(head_size) && (!on_long || dev_.features().subgroup_size % 2 == 0);
}

bool Kernels::out_ln_sg() const {
  return dev_.features().subgroup_arith && dev_.features().subgroup_shuffle;
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
  bind(cb, set, pipes_.get(key.first, key.second), &a, sizeof(a));
  vkCmdDispatch(cb, std::max(a.n_out, a.n_seq), 1, 1);
}

void Kernels::argmax(VkCommandBuffer cb, VkDescriptorSet set, uint32_t n, uint32_t rows,
                     uint32_t src, uint32_t dst) {
  if (n == 0 || rows == 0) throw EngineError("vk argmax: n > 0 and rows > 0 required");
  const uint32_t pc[4] = {n, kArgmaxPart, src, dst};
  bind(cb, set, pipes_.get("argmax", {kArgmaxWg}), pc, sizeof(pc));
  vkCmdDispatch(cb, argmax_parts(n), rows, 1);
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
  static const bool full = std::getenv("RWKVD_VK_FULL_BARRIERS") != nullptr;  // for comparisons
  if (full) return barrier(cb);
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
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
