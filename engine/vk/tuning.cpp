#include "engine/vk/tuning.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "engine/error.h"

namespace rwkvd::engine::vk {
namespace {

// The H100 and H200 (132 SMs): every value measured there unless it says otherwise. Times are
// GPU microseconds from vk_kernel_bench at the 2.9B shapes, rates `rwkvd bench` tok/s, variants
// alternating in one run.
Tuning hopper() {
  Tuning t;
  t.subgroups = t.coopmat = t.int_dot = true;  // every feature the device offers
  // A copy engine: the upload's copies neither queue behind nor delay the forward's dispatches.
  t.transfer_queue = true;
  // Dedicated allocations are ~20x faster to make (vk_alloc_bench, H200): most of a load's
  // usable time.
  t.dedicated_allocations = true;
  // Every row kernel and wkv reads the batch description, some through two dependent loads;
  // from host memory each crosses PCIe, microseconds a dispatch.
  t.meta_device_local = true;
  t.full_barriers = false;  // a barrier that also names transfers costs more on some drivers
  t.fence_spin_us = 20000;  // polling returns the moment the work is done; a decode step < 20 ms
  // Pinning costs the driver ~0.5 ms a MiB before the backend is usable; 64 MiB bought the upload
  // little (H100, 64 -> 16 MiB: 2.9B Q4_K_M usable 121-136 -> 111-116 ms, resident 204-229 ->
  // 223-231; 0.1B usable 52-61 -> 35-39, resident 69-78 -> 49-53).
  t.staging_bytes = uint64_t{16} << 20;
  t.upload_threads = 0;  // min(8, cores): one thread copies ~6 GB/s into write-combined memory
  t.mm_wg = 64;          // the portable product: a row per subgroup, two subgroups
  // A row kernel's workgroup is a token: at batch 1 the whole dispatch (64 left a 2.9B decode
  // waiting ~90 us per shift on latency).
  t.row_wg = 256;
  t.row_slices = true;   // a token's channels over D / 1024 workgroups: more SMs at batch 1
  t.max_row_groups = 0;  // the device's grid: a row a subgroup, no loop
  // From 32 tokens tensor cores are faster (2.9B Q4_K_M gen-32 801 -> 1161 at 16); 8 gains
  // nothing.
  t.mv_max_t = 16;
  t.mv_wg_one = 64;  // nothing is staged at one token: F16 2560 -> 10240 26 us at 64, 33 at 128
  // Four subgroups share each staged input chunk: 10-30% faster than 64 at 4-8 tokens; 256
  // leaves too few workgroups for 2560 rows.
  t.mv_wg = 128;
  t.mv_rows = 0;  // by the shape: mv.comp 2 (Q4_K 2560 -> 10240 19.4 -> 16.5 us, 4: 21.2)
  // 8 tokens a workgroup need so many registers that fewer warps fit (2.9B Q4_K_M gen-8 494 ->
  // 536 at 4).
  t.mv_tt_max = 4;
  t.mvq_wg = 64;     // mvq.comp stages nothing: the one-token size at any number of tokens
  t.mvq_pieces = 2;  // two 32-weight pieces in flight a lane before summing any
  t.mvq_ksplit = 0;  // by the shape: rows of 10240 inputs in 2 parts (five steps a row)
  // A head's rows take 4 a subgroup at one token (H200, Q6_K 65536 x 768: 31.0 us with one row,
  // 26.2 with two, 24.2 with four); 0.1B's own products lose with more (3072 -> 768 4.90 ->
  // 6.85 / 9.60).
  t.mvq_many_rows = 32768;
  t.q6_head_int8_max = 8;  // H200, Q6_K 65536 x 2560 at 8 rows: 175 us int8, 214 tensor cores
  t.mvf = true;            // F16 2560 -> 10240 at one token: mv.comp 28.2 us, mvf.comp 21.7
  t.mvf_wg = t.mvf_ks = t.mvf_words = t.mvf_rows = 0;  // by the shape (kernels.cpp mvf_key)
  // Fewer rows (the LoRA down products' 576) take workgroups of 64: F32 2560 -> 576 beside the
  // Q4_K r/k/v product 15.6 -> 13.2 us.
  t.mvf_many_rows = 1024;
  // Long products take 4 subgroups a row: F16 2560 -> 10240 at 1 / 2 / 4 subgroups 23.5 / 22.3 /
  // 21.7 us, 2560 -> 2560 (6.5M weights) 8.6 / 8.4 / 9.2.
  t.mvf_large_weights = uint64_t{16} << 20;
  // F32 rows of few-row products from 2048 inputs: one subgroup each (H200 gen-1, five rounds:
  // 2.9B Q4_K_M +1.4%, 1.5B +2.7%, never a loss on the mean).
  t.mvf_one_subgroup_k = 2048;
  t.shift_in_front = true;  // a dispatch and a barrier less: 0.1B gen-1 +14%, 1.5B +4% (H100)
  // Every workgroup of the product normalises the whole row first (H100 gen-1, apart / in
  // front: 0.1B (768) 1738-1752 / 1976-2002, 1.5B (2048) 668, 669 / 702, 695; 2.9B (2560) the
  // att shift 407, 411 / 409, 398, the ffn one 413, 414 / 383, 381: its 640 workgroups' shifts
  // cost more than the dispatch saved).
  t.att_front_most_k = t.ffn_front_most_k = 2048;
  t.mt_min_t = 9;        // below, most of a 64-token tile idles: the per-row product is faster
  t.half_inputs = true;  // 2.9B Q4_K_M prefill 9.2k -> 11.2k (H100): half the inputs' bytes
  t.f16_split = true;    // F16 on tensor cores at float32's precision (~21 bits an input)
  // NV v1 where both: MC_KHR (same 16x16x16 fragments, the same sums) is slower on long chunks
  // and has no few-token kernel (H100, 2.9B Q4_K_M, KHR / NV, two rounds: prefill 256 10,560,
  // 10,510 / 11,060, 11,130 tok/s; gen-256 9,824, 9,932 / 10,220, 10,190; gen-8 1,474, 1,489 /
  // 1,847, 1,825 on mcd.comp).
  t.mc_khr = false;
  // 32-token tiles below 256 workgroups (Q4_K 2560 -> 10240, 128 rows, 512 tokens: 32 tokens 351
  // us, 64 263; 10240 -> 2560, 320 workgroups: 368 on 32, 320 on 64).
  t.mc_small_grid = 256;
  // 128-row Q4_K tiles from ~2.5 waves (fp16 inputs, 64 / 128 rows: 2560 -> 10240 T 512, 640
  // workgroups, 243 / 204 us, T 128, 160: 80 / 85; 10240 -> 2560 T 1024 526 / 437, T 256 168 /
  // 178; Q6_K slower at every shape).
  t.mc_tall_grid = 256;
  t.mc_rows = t.mc_tokens = t.mc_split = 0;  // by the shape
  // Split K while row tiles x parts < 64 (512 tokens, 1 / 2 / 4 parts: Q4_K 10240 -> 2560 323 /
  // 277 / 283 us, 2560 -> 2560 79 / 75 / 88; 2560 -> 10240, 160 tiles, 224 / 253 / 285).
  t.mc_split_tiles = 64;
  // And on until a part has 40 steps (Q4_K 10240 -> 2560, 2 / 4 parts: T 512 265 / 227 us, T 854
  // 425 / 395; 2560 -> 2560, 40 steps, stays at 2: T 1024 119 / 136).
  t.mc_split_steps = 40;
  // Up to 4 tokens the int8 products cost less (1 / 2 / 4 tokens -> mcd.comp: Q4_K 2560 -> 10240
  // 12.1 / 16.3 / 22.3 -> ~22 us; 10240 -> 2560 12.8 / 18.3 / 24.9 -> ~33).
  t.mcd_min_t = 5;
  t.mcd_max_t = 16;  // mcd.comp's tile of 16 tokens; more take mc.comp
  t.mcd_sg = 8;      // the most it holds: 1/8 of K each, no barrier until the partial tiles add
  t.mcd_split = 0;   // by the shape
  // Split to the ffn key product's 640 workgroups, where mcd.comp runs near its best per byte
  // (8 tokens: Q4_K 2560 -> 10240 23.5 us; 10240 -> 2560 unsplit 34, in 4 parts 29.1).
  t.mcd_split_tiles = 640;
  t.mcd_split_min_steps = 4;  // fewer leave a part too little to hide its workgroup's start
  t.wkv_portable = false;     // wkv_sg.comp wherever its subgroup shuffles run
  t.fuse_lora = true;         // a dispatch and a barrier less per layer
  // Each (head, sequence) workgroup reads its head's LoRA up weights: many sequences read them
  // many times (2.9B Q4_K_M, fused / products: gen-1 378 / 357, 6-sequence field analysis 70 /
  // 73 ms, gen-8 967 / 969, gen-32 1372 / 1398).
  t.fused_lora_max_t = 32;
  t.fused_lora_max_b = 8;
  t.wkv_lanes = 8;  // the fewest a channel; more where the ranks need them (2.9B decode)
  // One-token sequences share a head's workgroup in groups of up to 4, loading its LoRA up
  // weights once (2.9B Q4_K_M, one / groups of 2 / 4 / 8: gen-4 935, 922 / 954, 951 / 922, 916;
  // gen-8 1596, 1576 / 1607, 1622 / 1672, 1662 / 1554, 1575).
  t.wkv_group = 4;
  t.wkv_long_t = 33;  // more tokens a pass of the parallel phases: each pass a latency, barriers
  t.wkv_pipelined = true;  // phases A and B overlap (wkv_long.comp)
  t.wkv_long_lanes = 16;   // 16 tokens a pass of wkv_sg.comp's long variant
  t.wkv_long_block = 16;   // fewer where shared memory is short
  t.wkv_slices = 0;        // by the grid
  // Each slice repeats phase A; past 2, phase B no longer shortens much (Q4_K_M doc state ms at
  // 1 / 2 / 4 / 8 slices: 0.1B 11.2 / 9.0 / 9.3 / 9.4, 1.5B 41.9 / 38.4 / 38.1 / 46.4, 2.9B
  // 70.8 / 64.8 / 77.7 / 88.0).
  t.wkv_slices_most = 2;
  // One wave: no more workgroups than 132 SMs hold at once (a second wave doubles the time of the
  // SMs that take two).
  t.wkv_slice_grid = 128;
  return t;
}

// Other NVIDIA GPUs, AMD, Intel and any other GPU: no value was measured on these classes, so
// each keeps Hopper's (the rules scale with the subgroup size and the device's limits, which the
// kernels read from the device). Each class has its table so that a measurement lands here.
Tuning nvidia() {
  return hopper();
}
Tuning amd() {
  return hopper();
}
Tuning intel() {
  return hopper();
}
Tuning portable() {
  return hopper();
}

// CPU devices (lavapipe) pay per workgroup and per idle invocation: few small workgroups, each
// looping over many rows.
Tuning cpu() {
  Tuning t = hopper();
  t.mm_wg = t.row_wg = 16;
  t.mv_wg_one = t.mv_wg = t.mvq_wg = t.mvf_wg = 16;
  t.row_slices = false;
  t.max_row_groups = 4;
  t.wkv_long_t = 0;     // the long-chunk kernels' wide workgroups idle most invocations there
  t.fence_spin_us = 0;  // a polling host core is one the device's own threads need
  return t;
}

// A value's allowed range: [lo, hi], and where `only` is not empty, one of those.
struct Range {
  uint64_t lo, hi;
  std::initializer_list<uint64_t> only = {};
};

// Every field of Tuning with its JSON name (the member's) and, for numbers, its range: the one
// list that reading, writing and checking a tuning walk.
template <class T, class V>
void for_each_field(T& t, V&& v) {
  constexpr uint64_t kAny = UINT32_MAX, kHuge = UINT64_MAX;
  v("subgroups", t.subgroups);
  v("coopmat", t.coopmat);
  v("int_dot", t.int_dot);
  v("transfer_queue", t.transfer_queue);
  v("dedicated_allocations", t.dedicated_allocations);
  v("meta_device_local", t.meta_device_local);
  v("full_barriers", t.full_barriers);
  v("fence_spin_us", t.fence_spin_us, Range{0, kHuge});
  v("staging_bytes", t.staging_bytes, Range{1 << 16, kHuge});
  v("upload_threads", t.upload_threads, Range{0, 64});
  v("mm_wg", t.mm_wg, Range{1, 1024, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}});
  v("row_wg", t.row_wg, Range{16, 1024, {16, 32, 64, 128, 256, 512, 1024}});
  v("row_slices", t.row_slices);
  v("max_row_groups", t.max_row_groups, Range{0, kAny});
  v("mv_max_t", t.mv_max_t, Range{0, kAny});
  v("mv_wg_one", t.mv_wg_one, Range{1, 1024});
  v("mv_wg", t.mv_wg, Range{1, 1024});
  v("mv_rows", t.mv_rows, Range{0, 4});
  v("mv_tt_max", t.mv_tt_max, Range{1, 8, {1, 2, 4, 8}});
  v("mvq_wg", t.mvq_wg, Range{1, 1024});
  v("mvq_pieces", t.mvq_pieces, Range{1, 8});
  v("mvq_ksplit", t.mvq_ksplit, Range{0, 32});
  v("mvq_many_rows", t.mvq_many_rows, Range{0, kAny});
  v("q6_head_int8_max", t.q6_head_int8_max, Range{0, kAny});
  v("mvf", t.mvf);
  v("mvf_wg", t.mvf_wg, Range{0, 256, {0, 1, 2, 4, 8, 16, 32, 64, 128, 256}});
  v("mvf_ks", t.mvf_ks, Range{0, 32});
  v("mvf_words", t.mvf_words, Range{0, 8});
  v("mvf_rows", t.mvf_rows, Range{0, 4});
  v("mvf_many_rows", t.mvf_many_rows, Range{0, kAny});
  v("mvf_large_weights", t.mvf_large_weights, Range{0, kHuge});
  v("mvf_one_subgroup_k", t.mvf_one_subgroup_k, Range{0, kAny});
  v("shift_in_front", t.shift_in_front);
  v("att_front_most_k", t.att_front_most_k, Range{0, kAny});
  v("ffn_front_most_k", t.ffn_front_most_k, Range{0, kAny});
  v("mt_min_t", t.mt_min_t, Range{0, kAny});
  v("half_inputs", t.half_inputs);
  v("f16_split", t.f16_split);
  v("mc_khr", t.mc_khr);
  v("mc_small_grid", t.mc_small_grid, Range{0, kAny});
  v("mc_tall_grid", t.mc_tall_grid, Range{0, kAny});
  v("mc_rows", t.mc_rows, Range{0, 128, {0, 64, 128}});
  v("mc_tokens", t.mc_tokens, Range{0, 64, {0, 32, 64}});
  v("mc_split", t.mc_split, Range{0, 8, {0, 1, 2, 4, 8}});
  v("mc_split_tiles", t.mc_split_tiles, Range{0, kAny});
  v("mc_split_steps", t.mc_split_steps, Range{0, kAny});
  v("mcd_min_t", t.mcd_min_t, Range{1, 16});
  v("mcd_max_t", t.mcd_max_t, Range{0, 16});
  v("mcd_sg", t.mcd_sg, Range{1, 8});
  v("mcd_split", t.mcd_split, Range{0, 4, {0, 1, 2, 4}});
  v("mcd_split_tiles", t.mcd_split_tiles, Range{0, kAny});
  v("mcd_split_min_steps", t.mcd_split_min_steps, Range{0, kAny});
  v("wkv_portable", t.wkv_portable);
  v("fuse_lora", t.fuse_lora);
  v("fused_lora_max_t", t.fused_lora_max_t, Range{0, kAny});
  v("fused_lora_max_b", t.fused_lora_max_b, Range{0, kAny});
  v("wkv_lanes", t.wkv_lanes, Range{4, 16, {4, 8, 16}});
  v("wkv_group", t.wkv_group, Range{1, 8});
  v("wkv_long_t", t.wkv_long_t, Range{0, kAny});
  v("wkv_pipelined", t.wkv_pipelined);
  v("wkv_long_lanes", t.wkv_long_lanes, Range{4, 16, {4, 8, 16}});
  v("wkv_long_block", t.wkv_long_block, Range{4, 32, {4, 8, 12, 16, 20, 24, 28, 32}});
  v("wkv_slices", t.wkv_slices, Range{0, 8, {0, 1, 2, 4, 8}});
  v("wkv_slices_most", t.wkv_slices_most, Range{1, 8, {1, 2, 4, 8}});
  v("wkv_slice_grid", t.wkv_slice_grid, Range{0, kAny});
}

std::string range_text(const Range& r) {
  std::ostringstream o;
  if (r.only.size() > 0) {
    const char* sep = "one of ";
    for (const uint64_t x : r.only) {
      o << sep << x;
      sep = ", ";
    }
  } else {
    o << r.lo << " to " << r.hi;
  }
  return o.str();
}

bool in_range(uint64_t x, const Range& r) {
  if (x < r.lo || x > r.hi) return false;
  if (r.only.size() == 0) return true;
  for (const uint64_t y : r.only) {
    if (x == y) return true;
  }
  return false;
}

}  // namespace

void check_tuning(const Tuning& t, const std::string& origin) {
  for_each_field(t, [&](const char* name, const auto& field, auto... range) {
    if constexpr (sizeof...(range) == 1) {
      const Range r = (range, ...);
      if (!in_range(field, r)) {
        throw EngineError(origin + ": tuning value " + name + " = " + std::to_string(field) +
                          " is not " + range_text(r));
      }
    }
  });
}

namespace {

// Whether $name is exactly `value`.
bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace

const char* device_class_name(DeviceClass c) {
  switch (c) {
    case DeviceClass::kNvidiaHopper:
      return "nvidia-hopper";
    case DeviceClass::kNvidia:
      return "nvidia";
    case DeviceClass::kAmd:
      return "amd";
    case DeviceClass::kIntel:
      return "intel";
    case DeviceClass::kCpu:
      return "cpu";
    case DeviceClass::kPortable:
      break;
  }
  return "portable";
}

DeviceClass device_class(uint32_t vendor_id, VkPhysicalDeviceType type, std::string_view name) {
  constexpr uint32_t kNvidiaId = 0x10de, kAmdId = 0x1002, kIntelId = 0x8086;
  if (type == VK_PHYSICAL_DEVICE_TYPE_CPU) return DeviceClass::kCpu;
  if (vendor_id == kNvidiaId) {
    static const std::regex hopper(R"(\bG?H(100|200|800|20)\b)");
    return std::regex_search(std::string(name), hopper) ? DeviceClass::kNvidiaHopper
                                                        : DeviceClass::kNvidia;
  }
  if (vendor_id == kAmdId) return DeviceClass::kAmd;
  if (vendor_id == kIntelId) return DeviceClass::kIntel;
  return DeviceClass::kPortable;
}

Tuning tuning_table(DeviceClass c) {
  switch (c) {
    case DeviceClass::kNvidiaHopper:
      return hopper();
    case DeviceClass::kNvidia:
      return nvidia();
    case DeviceClass::kAmd:
      return amd();
    case DeviceClass::kIntel:
      return intel();
    case DeviceClass::kCpu:
      return cpu();
    case DeviceClass::kPortable:
      break;
  }
  return portable();
}

void apply_tuning_json(Tuning& t, std::string_view text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw EngineError(origin + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw EngineError(origin + ": a tuning file holds one JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& value = it.value();
    bool known = false;
    auto set = [&](const char* name, auto& field, auto... range) {
      if (key != name) return;
      known = true;
      using F = std::remove_reference_t<decltype(field)>;
      if constexpr (sizeof...(range) == 0) {
        if (!value.is_boolean()) throw EngineError(origin + ": " + key + " must be true or false");
        field = value.get<bool>();
      } else {
        const Range r = (range, ...);
        if (!value.is_number_unsigned() || !in_range(value.get<uint64_t>(), r)) {
          throw EngineError(origin + ": " + key + " must be an integer, " + range_text(r) +
                            " (got " + value.dump() + ")");
        }
        field = static_cast<F>(value.get<uint64_t>());
      }
    };
    for_each_field(t, set);
    if (!known) throw EngineError(origin + ": unknown tuning key \"" + key + "\"");
  }
}

std::string tuning_json(const Tuning& t) {
  nlohmann::ordered_json j;
  for_each_field(t, [&](const char* name, const auto& field, auto...) { j[name] = field; });
  return j.dump();
}

Tuning choose_tuning(DeviceClass c, const TuningPatch& patch) {
  Tuning t = tuning_table(c);
  if (env_is("RWKVD_VK_NO_SUBGROUP", "1")) t.subgroups = false;
  if (env_is("RWKVD_VK_COOPMAT", "0")) t.coopmat = false;
  if (env_is("RWKVD_VK_INT_DOT", "0")) t.int_dot = false;
  if (const char* path = std::getenv("RWKVD_VK_TUNING"); path != nullptr && *path != '\0') {
    const std::string origin = std::string("RWKVD_VK_TUNING=") + path;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw EngineError(origin + ": cannot read the file");
    std::ostringstream text;
    text << in.rdbuf();
    apply_tuning_json(t, text.str(), origin);
  }
  if (patch) patch(t);
  check_tuning(t, "vulkan tuning");
  return t;
}

}  // namespace rwkvd::engine::vk
