#pragma once
// The Vulkan engine's tuning as data: every number and switch that the kernels' choices, the
// queues and the upload read, in one value. tuning.cpp holds one table per device class (the
// values and, beside each, why), chosen from the device's identity by device_class();
// $RWKVD_VK_TUNING=file.json overrides single values for experiments (docs/VULKAN.md). Tests and
// benchmarks pass a TuningPatch instead of setting the environment.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace rwkvd::engine::vk {

// What each value means; the values themselves are the tables' (tuning.cpp). "0: by the shape"
// leaves a choice to its rule in kernels.cpp.
struct Tuning {
  // Device features the engine may use where the device offers them (RWKVD_VK_NO_SUBGROUP=1,
  // RWKVD_VK_COOPMAT=0 and RWKVD_VK_INT_DOT=0 clear them): subgroup kernels, tensor cores
  // (VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix), integer dot products
  // (VK_KHR_shader_integer_dot_product).
  bool subgroups = false, coopmat = false, int_dot = false;

  // Queues, memory and the host.
  bool transfer_queue = false;         // upload on a transfer-only queue family where one exists
  bool dedicated_allocations = false;  // each buffer a dedicated allocation
  bool meta_device_local = false;      // batch description in device-local host-visible memory
  bool full_barriers = false;          // compute+transfer barriers between dispatches (comparison)
  uint64_t fence_spin_us = 0;          // host polls a fence this long before blocking
  uint64_t staging_bytes = 0;          // pinned host memory of the weight upload
  uint32_t upload_threads = 0;         // threads copying the file into staging (0: min(8, cores))

  // Workgroups of the portable product (mm.comp) and of the row kernels (embed, shift, out_ln);
  // shift.comp spreading a token over D / 4 / row_wg workgroups; most workgroups along a row
  // kernel's rows (0: the device's grid; the rest loop).
  uint32_t mm_wg = 0, row_wg = 0;
  bool row_slices = false;
  uint32_t max_row_groups = 0;

  // mv.comp, the decode matvec: most tokens (0: never), workgroup at one token and at several,
  // rows a subgroup (0: by the shape; forces mvq.comp's too), most tokens a workgroup.
  uint32_t mv_max_t = 0, mv_wg_one = 0, mv_wg = 0, mv_rows = 0, mv_tt_max = 0;
  // mvq.comp (int8 inputs): workgroup, pieces a lane loads before summing, subgroups sharing a
  // row (0: by the shape, 1: never), rows from which one token takes 4 rows a subgroup, and the
  // most logit rows of a Q6_K head that stay here where mcd.comp would take them.
  uint32_t mvq_wg = 0, mvq_pieces = 0, mvq_ksplit = 0, mvq_many_rows = 0, q6_head_int8_max = 0;
  // mvf.comp (float weights at one token): on at all, workgroup (0: by the shape), subgroups a
  // row (0: by the shape), 16-byte words a lane in flight (0: by the shape), rows a team (0: by
  // the shape); rows from which a product has rows enough for the GPU, weights from which a row
  // takes 4 subgroups, inputs from which a row of a product of few F32 rows is one subgroup's.
  bool mvf = false;
  uint32_t mvf_wg = 0, mvf_ks = 0, mvf_words = 0, mvf_rows = 0, mvf_many_rows = 0;
  uint64_t mvf_large_weights = 0;
  uint32_t mvf_one_subgroup_k = 0;
  // The shift of one token run in front of its products (shaders/shift_front.glsl), and the
  // longest rows that take it: the time-mix shift's products, the channel-mix one's.
  bool shift_in_front = false;
  uint32_t att_front_most_k = 0, ffn_front_most_k = 0;

  // mt.comp, the fp32 tiled product: fewest tokens.
  uint32_t mt_min_t = 0;
  // mc.comp (tensor cores): inputs in their fp16 form, F16 weights from split inputs; 32-token
  // tiles below this many workgroups (0: never); 128-row Q4_K tiles from this many; forced tile
  // rows (64 or 128; 0: by the shape) and tokens (32 or 64; 0: by the grid); split-K forced (1:
  // never, 2-8: up to that; 0: by the shape), the row tiles below which it splits, and the most
  // steps of 64 inputs a part keeps.
  bool half_inputs = false, f16_split = false;
  // mc.comp's products through VK_KHR_cooperative_matrix (MC_KHR) even where the device offers
  // VK_NV_cooperative_matrix too (devices with the KHR extension alone take it anyway).
  bool mc_khr = false;
  uint32_t mc_small_grid = 0, mc_tall_grid = 0, mc_rows = 0, mc_tokens = 0, mc_split = 0,
           mc_split_tiles = 0, mc_split_steps = 0;
  // mcd.comp (tensor cores for a few tokens): the token counts it takes (max 0: never),
  // subgroups a workgroup, split-K forced (1: never, 2 or 4; 0: by the shape), the workgroups
  // a split reaches at most, and the fewest steps a subgroup keeps.
  uint32_t mcd_min_t = 0, mcd_max_t = 0, mcd_sg = 0, mcd_split = 0, mcd_split_tiles = 0,
           mcd_split_min_steps = 0;

  // wkv: the portable kernel forced; the LoRA up products inside wkv_sg.comp and the most
  // tokens and sequences of a forward that does so; fewest invocations a channel of that phase;
  // most one-token sequences a workgroup takes.
  bool wkv_portable = false, fuse_lora = false;
  uint32_t fused_lora_max_t = 0, fused_lora_max_b = 0, wkv_lanes = 0, wkv_group = 0;
  // Long chunks: from how many tokens (0: never), wkv_long.comp (else wkv_sg.comp's long
  // variant), its invocations a channel and tokens a block; row slices of a (head, sequence)
  // forced (0: by the grid), the most the rule takes, and the workgroups they may reach.
  uint32_t wkv_long_t = 0;
  bool wkv_pipelined = false;
  uint32_t wkv_long_lanes = 0, wkv_long_block = 0, wkv_slices = 0, wkv_slices_most = 0,
           wkv_slice_grid = 0;

  bool operator==(const Tuning&) const = default;
};

// A change to the chosen tuning (tests, benchmarks), applied after $RWKVD_VK_TUNING.
using TuningPatch = std::function<void(Tuning&)>;

enum class DeviceClass { kNvidiaHopper, kNvidia, kAmd, kIntel, kCpu, kPortable };
const char* device_class_name(DeviceClass c);
// By the device type (CPU devices: lavapipe), then the vendor, then for NVIDIA the name (the
// Hopper data-centre parts: H100, H200, H800, H20, GH200).
DeviceClass device_class(uint32_t vendor_id, VkPhysicalDeviceType type, std::string_view name);
// The class's table (tuning.cpp).
Tuning tuning_table(DeviceClass c);

// The table of the class, then the feature switches of the environment, then $RWKVD_VK_TUNING's
// file, then `patch`. Throws EngineError naming the key for an unknown key or a bad value.
Tuning choose_tuning(DeviceClass c, const TuningPatch& patch = {});
// Overrides the values that a JSON object names (text; `origin` names it in errors).
void apply_tuning_json(Tuning& t, std::string_view text, const std::string& origin);
// Throws EngineError naming the first value out of its range (`origin` says whose tuning).
void check_tuning(const Tuning& t, const std::string& origin);
// Every value as one JSON object, keys in the struct's order (inspect, tests).
std::string tuning_json(const Tuning& t);

}  // namespace rwkvd::engine::vk
