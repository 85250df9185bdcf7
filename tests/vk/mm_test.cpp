// The grouped matrix product (shaders/mm.comp) for every weight type against a CPU loop over
// engine/quant's dequantize(): random blocks (scales kept finite), 4 weights in one dispatch
// with every epilogue, a token count that leaves a partial token tile, with and without the
// subgroup variant. Types dequantize() cannot read yet are skipped with a message.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/ggml_type.h"
#include "engine/quant/dequant.h"
#include "engine/quant/half.h"
#include "engine/vk/device_layout.h"
#include "tests/vk/q8_check.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::GgmlType;
using engine::vk::Device;
using engine::vk::MmMode;
using engine::vk::MmSlot;
using engine::vk::Tuning;

// float -> IEEE half for the modest normal values the tests use.
uint16_t to_half(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const int32_t e = static_cast<int32_t>((b >> 23) & 0xff) - 127 + 15;
  if (e <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e) << 10) | ((b >> 13) & 0x3ffu));
}

void put_half(std::vector<std::byte>& v, size_t at, float f) {
  const uint16_t h = to_half(f);
  std::memcpy(&v[at], &h, 2);
}

// Random bytes of `rows` rows of K elements, with every scale field a sane half.
std::vector<std::byte> random_weights(GgmlType t, uint32_t K, uint32_t rows, uint32_t seed) {
  const auto& tr = engine::ggml_traits(t);
  const size_t row_bytes = *engine::ggml_row_bytes(t, K), blocks = rows * (K / tr.block_elems);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::byte> w(rows * row_bytes);
  if (t == GgmlType::F32) {
    for (size_t i = 0; i < w.size() / 4; ++i) {
      const float f = u(rng);
      std::memcpy(&w[4 * i], &f, 4);
    }
    return w;
  }
  if (t == GgmlType::F16 || t == GgmlType::BF16) {
    for (size_t i = 0; i < w.size() / 2; ++i) {
      const float f = u(rng);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const uint16_t h = t == GgmlType::F16 ? to_half(f) : static_cast<uint16_t>(b >> 16);
      std::memcpy(&w[2 * i], &h, 2);
    }
    return w;
  }
  for (auto& b : w) b = static_cast<std::byte>(rng() & 0xff);
  for (size_t blk = 0; blk < blocks; ++blk) {
    const size_t at = blk * tr.block_bytes;
    const float d = 0.01f + 0.05f * std::abs(u(rng)), m = 0.05f * u(rng);
    switch (t) {
      case GgmlType::Q8_0:
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
        put_half(w, at, d);
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put_half(w, at, d);
        put_half(w, at + 2, m);
        break;
      case GgmlType::Q6_K:
        put_half(w, at + 208, d);
        break;
      default:
        break;
    }
  }
  return w;
}

float apply(MmMode m, float y, float prev) {
  switch (m) {
    case MmMode::kAdd:
      return y + prev;
    case MmMode::kTanh:
      return std::tanh(y);
    case MmMode::kSigmoid:
      return 1.0f / (1.0f + std::exp(-y));
    case MmMode::kReluSq:
      return y > 0 ? y * y : 0.0f;
    default:
      return y;
  }
}

void check_product(VkRig& rig, GgmlType type, uint32_t T, uint32_t K, bool subgroups);

class VkMatmul : public ::testing::TestWithParam<GgmlType> {};

// T = 1, 3 and 11 run the decode matvec (mv.comp) where subgroups exist (else mm.comp, and the
// tiled mt.comp from 9 tokens), 3 and 11 from the fp16 form on tensor cores (mcd.comp) for
// quantised types where the device has them; 70 (two 64-token tiles) runs mt.comp, or mc.comp on
// tensor cores for quantised types (and F32 with MmSlot::half_ok) where the device has them. K =
// 1280 gives mv.comp several staged chunks of K, the last one partial (chunks are 32 x the subgroup
// size: 1024 on NVIDIA). Variants: subgroups, then (tensor-core devices) the same device with
// mc.comp's 64-token tiles forced (the test's grids are small enough to get its 32-token tiles
// otherwise) and both with 128-row tiles; no subgroups. Few devices per process: the NVIDIA driver
// refuses new instances after about 30.
TEST_P(VkMatmul, MatchesDequantizedCpuProductEveryEpilogue) {
  for (const bool subgroups : {true, false}) {
    VkRig rig([&](Tuning& t) { t.subgroups = subgroups; });
    const uint64_t errors = Device::validation_errors();
    // The default, the float kernels' variants at one token, then each forced variant of the
    // tensor-core kernels.
    struct Tiles {
      const char* label;
      std::function<void(Tuning&)> patch;
    };
    const std::vector<Tiles> tiles = {
        {"", {}},
        // Float weights at one token take mvf.comp: mv.comp's way (4 rows a subgroup, as F16
        // took for large products before), and mvf.comp with a subgroup a row (the test's rows
        // are few enough to get several) and more words a lane.
        {", mv 4 rows a subgroup",
         [](Tuning& t) {
           t.mv_rows = 4;
           t.mvf = false;
         }},
        {", mvf 2 rows a subgroup, 8 words",
         [](Tuning& t) {
           t.mvf_ks = 1;
           t.mvf_rows = 2;
           t.mvf_words = 8;
         }},
        {", 64-token mc tiles", [](Tuning& t) { t.mc_small_grid = 0; }},
        {", 128-row mc tiles", [](Tuning& t) { t.mc_rows = 128; }},
        {", 128-row 64-token mc tiles",
         [](Tuning& t) {
           t.mc_rows = 128;
           t.mc_small_grid = 0;
         }},
        // The test's products are small enough for mc_split() to split K in 8 by default.
        {", mc without split-K", [](Tuning& t) { t.mc_split = 1; }},
        {", mc split-K in 2", [](Tuning& t) { t.mc_split = 2; }},
        {", mc split-K in 4", [](Tuning& t) { t.mc_split = 4; }},
        // mcd.comp (T = 3 and 11 by default): one token too, and its other shapes.
        {", mcd from one token", [](Tuning& t) { t.mcd_min_t = 1; }},
        {", mcd with 3 subgroups", [](Tuning& t) { t.mcd_sg = 3; }},
        {", mcd with 1 subgroup", [](Tuning& t) { t.mcd_sg = 1; }},
        // mcd.comp split over K (mc_sum.comp adds the parts): the test's rows are too short
        // for mcd_split() to split them by default; with 4 parts of 2 steps (K = 512) over 3
        // subgroups, one subgroup has no step.
        {", mcd split-K in 2", [](Tuning& t) { t.mcd_split = 2; }},
        {", mcd split-K in 4, 3 subgroups",
         [](Tuning& t) {
           t.mcd_split = 4;
           t.mcd_sg = 3;
         }},
        {", no mcd", [](Tuning& t) { t.mcd_max_t = 0; }},
    };
    for (size_t ti = 0; ti < tiles.size(); ++ti) {
      const bool float_type = GetParam() == engine::GgmlType::F16 ||
                              GetParam() == engine::GgmlType::F32 ||
                              GetParam() == engine::GgmlType::BF16;
      if ((ti == 1 || ti == 2) && !float_type) continue;  // (time on lavapipe)
      if (ti > 0) {
        // (The forced tiles are VK_NV_cooperative_matrix's: mc.comp MC_KHR takes its default
        // tiles, split-K included, above.)
        if (ti > 2 && !rig.dev->features().coopmat) break;
        rig.retune(tiles[ti].patch);
        rig.fresh_sets();  // a set per case: the variants' cases outnumber one pool's sets
      }
      for (const auto& [T, K] : {std::pair{1u, 512u},
                                 {3u, 512u},
                                 {11u, 512u},
                                 {70u, 512u},
                                 {150u, 512u},
                                 {1u, 1280u},
                                 {3u, 1280u},
                                 // 9 blocks of 256: a Q6_K row's full group of 8 on the
                                 // device and a partial one (device_layout.h).
                                 {1u, 2304u},
                                 {11u, 2304u},
                                 // K of a LoRA rank (float types): an odd number of 32-input
                                 // pieces, whose last 64-input step mc.comp stages half as
                                 // zeros (never on mcd.comp, whose steps are whole).
                                 {11u, 96u},
                                 {70u, 96u},
                                 {70u, 32u}}) {
        if (K % engine::ggml_traits(GetParam()).block_elems != 0) continue;
        SCOPED_TRACE("T = " + std::to_string(T) + ", K = " + std::to_string(K) + tiles[ti].label);
        check_product(rig, GetParam(), T, K, subgroups);
        if (HasFatalFailure() || IsSkipped()) return;
      }
    }
    RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
  }
}

// Weight binding s holds `rows` rows of w (GGUF bytes) in their device form, as the uploader
// writes them (engine/vk/device_layout.h).
void put_weights(VkRig& rig, int s, GgmlType t, uint32_t K, uint32_t rows,
                 const std::vector<std::byte>& w) {
  std::vector<std::byte> d(rows * engine::vk::device_row_bytes(t, K));
  engine::vk::to_device_rows(t, K, w.data(), d.data(), rows);
  rig.make(rig.weights[s], d.size() / 4 + 4);
  std::memcpy(rig.weights[s].mapped(), d.data(), d.size());
}

void check_product(VkRig& rig, GgmlType type, uint32_t T, uint32_t K, bool subgroups) {
  const uint32_t Ns[4] = {24, 7, 150, 9};  // 150: three 64-row tiles (mt.comp, mc.comp), two of 128
  const MmMode modes[2][4] = {{MmMode::kStore, MmMode::kAdd, MmMode::kTanh, MmMode::kSigmoid},
                              {MmMode::kReluSq, MmMode::kStore, MmMode::kAdd, MmMode::kStore}};
  std::vector<std::byte> w[4];
  std::vector<float> wf[4];
  for (int s = 0; s < 4; ++s) {
    w[s] = random_weights(type, K, Ns[s], 10 + s);
    wf[s].resize(size_t{K} * Ns[s]);
    try {
      engine::dequantize(type, w[s].data(), wf[s].data(), static_cast<int64_t>(wf[s].size()));
    } catch (const engine::EngineError& e) {
      GTEST_SKIP() << "dequantize cannot read " << engine::ggml_traits(type).name
                   << " yet: " << e.what();
    }
  }
  const std::vector<float> x = random_floats(size_t{T} * K, 7);
  bool ran_coopmat = false;
  {
    for (int s = 0; s < 4; ++s) {
      put_weights(rig, s, type, K, Ns[s], w[s]);
    }
    // act: x, then y of each slot, then x's fp16 form (h16.comp) for tensor cores.
    uint32_t y_off[4], at = T * K;
    for (int s = 0; s < 4; ++s) {
      y_off[s] = at;
      at += T * Ns[s];
    }
    const uint32_t h_off = (at + 3) / 4 * 4;
    at = h_off + T * K / 2;
    // Scratch for split-K partial sums (mc.comp): up to 8 parts of every slot's outputs.
    const uint32_t part_off = at, part_width = 8 * (Ns[0] + Ns[1] + Ns[2] + Ns[3]);
    at += T * part_width;
    rig.make(rig.vecs, 4);
    rig.make(rig.meta, 4);
    rig.make(rig.state, 4);
    rig.make(rig.act, at);
    const VkDescriptorSet set = rig.set();
    // F32 weights also as the LoRA products of a quantised model (MmSlot::half_ok: on tensor
    // cores where the device has them, with their fp16 tolerance).
    const bool half_too =
        type == GgmlType::F32 && (rig.dev->features().coopmat || rig.dev->features().khr_m != 0);
    // Runs 4 and 5: the same as 0 and 1 (2 and 3 for F32) from x's fp16 form, where tensor
    // cores take them.
    for (int run = 0; run < 6; ++run) {
      const auto& mode = modes[run % 2];
      const bool half_ok = half_too && run >= 2;
      const bool via_h16 = run >= 4;
      if (run >= 2 && run < 4 && !half_too) continue;
      // (F16 weights take float inputs to split them in two halves: no fp16 form.)
      if (via_h16 &&
          (!rig.kernels->uses_coopmat(type, K, T, half_ok) || rig.kernels->splits_inputs(type))) {
        continue;
      }
      const std::vector<float> prev = random_floats(at, 99);
      std::memcpy(rig.act.mapped(), prev.data(), prev.size() * 4);
      std::memcpy(rig.act.mapped(), x.data(), x.size() * 4);
      MmSlot slots[4];
      for (int s = 0; s < 4; ++s) {
        slots[s] = {K,       Ns[s],
                    0,       y_off[s],
                    mode[s], static_cast<uint32_t>(engine::vk::device_row_bytes(type, K))};
        slots[s].half_ok = half_ok;
        slots[s].part_off = part_off;
        slots[s].part_width = part_width;
        if (via_h16) slots[s].h16_off = h_off;
      }
      if (via_h16) {
        ASSERT_TRUE(rig.kernels->reads_h16(type, slots, T));
        const engine::vk::Kernels::HalfRegion region{K, 0, h_off};
        rig.run([&](VkCommandBuffer cb) { rig.kernels->to_half(cb, set, T, {&region, 1}); });
        // The product must read the fp16 form alone: its float source becomes NaN.
        std::fill_n(rig.ptr<float>(rig.act), size_t{T} * K, std::nanf(""));
      }
      rig.run([&](VkCommandBuffer cb) { rig.kernels->mm(cb, set, type, slots, T); });
      // Up to 16 tokens tensor cores (mcd.comp) take only the fp16 form; from 17 mc.comp takes
      // floats too. F16 weights there take the inputs as two halves: held to the float bound.
      const bool cores = T > 16 && rig.kernels->uses_coopmat(type, K, T, half_ok);
      const bool fp16 = via_h16 || (cores && !rig.kernels->splits_inputs(type));
      if (via_h16 || cores) ran_coopmat = true;
      for (int s = 0; s < 4; ++s) {
        for (uint32_t t = 0; t < T; ++t) {
          for (uint32_t o = 0; o < Ns[s]; ++o) {
            double y = 0, mag = 0, wsum = 0;
            for (uint32_t i = 0; i < K; ++i) {
              y += double{wf[s][o * K + i]} * x[t * K + i];
              mag += std::abs(double{wf[s][o * K + i]} * x[t * K + i]);
              wsum += std::abs(double{wf[s][o * K + i]});
            }
            const size_t yo = y_off[s] + t * Ns[s] + o;
            const float want = apply(mode[s], static_cast<float>(y), prev[yo]);
            // float32 summation error of the dot product, through the epilogue's slope. On
            // tensor cores (mc.comp) both operands are rounded to fp16 (2^-11 relative each)
            // and inputs, scaled by 2^-8, to fp16's subnormal step (2^-25, 2^-17 unscaled).
            const double tol_y = fp16 ? 2.2 * std::ldexp(1.0, -11) * mag +
                                            std::ldexp(1.0, -17) * wsum + 2e-6 * mag + 1e-6
                                      : 2e-6 * mag + 1e-6;
            const double tol =
                mode[s] == MmMode::kReluSq ? (2 * std::abs(y) + tol_y) * tol_y : tol_y;
            ASSERT_NEAR(rig.ptr<float>(rig.act)[yo], want, tol)
                << "slot " << s << " mode " << static_cast<int>(mode[s]) << " t " << t << " o " << o
                << (subgroups ? " (subgroups)" : " (workgroup reduction)")
                << (via_h16 ? " from the fp16 form" : "");
          }
        }
      }
    }
  }
  if (ran_coopmat) std::printf("[ coopmat  ] T = %u ran on tensor cores\n", T);
  // On a device with tensor cores a chunk of quantised products in whole 64-input steps takes
  // them.
  if (coopmat_required() && subgroups && T > 16 && K % 64 == 0 &&
      ggml_traits(type).block_elems > 1) {
    EXPECT_TRUE(ran_coopmat) << "T = " << T << ": no tensor cores (RWKVD_REQUIRE_COOPMAT=1)";
  }
}

// h16.comp: the fp16 form tensor-core products read (runs on any device, lavapipe included).
// Each half is x * 2^-8 rounded to a neighbouring half (GLSL leaves packHalf2x16's rounding to
// the implementation), from two regions of different widths in one dispatch.
TEST(VkHalfForm, IsScaledInputsRoundedToHalves) {
  VkRig rig;
  const uint64_t errors = Device::validation_errors();
  const uint32_t T = 3, K[2] = {64, 40};
  const uint32_t x_off[2] = {0, T * K[0]}, h_off[2] = {T * (K[0] + K[1]), T * (K[0] + K[1] + 32)};
  std::vector<float> x = random_floats(size_t{T} * (K[0] + K[1]), 5);
  for (size_t i = 0; i < x.size(); i += 7) x[i] *= 3e3f;  // large activations (relu^2 outputs)
  rig.make(rig.weights[0], 4);
  rig.make(rig.vecs, 4);
  rig.make(rig.meta, 4);
  rig.make(rig.state, 4);
  rig.make(rig.act, h_off[1] + T * K[1] / 2);
  std::memcpy(rig.act.mapped(), x.data(), x.size() * 4);
  const VkDescriptorSet set = rig.set();
  const engine::vk::Kernels::HalfRegion regions[2] = {{K[0], x_off[0], h_off[0]},
                                                      {K[1], x_off[1], h_off[1]}};
  rig.run([&](VkCommandBuffer cb) { rig.kernels->to_half(cb, set, T, regions); });
  const auto* words = reinterpret_cast<const uint16_t*>(rig.act.mapped());
  for (int r = 0; r < 2; ++r) {
    for (uint32_t i = 0; i < T * K[r]; ++i) {
      const float want = x[x_off[r] + i] / 256.0f;
      const uint16_t got = words[2 * h_off[r] + i], near = engine::fp32_to_fp16(want);
      ASSERT_LE(std::abs(int{got} - int{near}), 1) << "region " << r << " element " << i << ": "
                                                   << engine::fp16_to_fp32(got) << " for " << want;
    }
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

// Tensor-core products also writing their outputs' fp16 form (MmSlot::yh_off, for the ffn value
// product): a few tokens (mcd.comp: 5 of a 16-token tile) and many (mc.comp: 70, two 64-token
// tiles). The words must be h16.comp's of the floats the product stored, bit for bit, for both
// slots, every token, a ReLU^2 epilogue included; with y_half_only the same words, and mc.comp
// leaves the floats unwritten.
TEST(VkMatmulHalfOut, WritesTheFp16FormOfItsOutputs) {
  VkRig rig;
  constexpr GgmlType kType = GgmlType::Q4_K;
  constexpr uint32_t K = 512, N[2] = {48, 24};
  const uint64_t errors = Device::validation_errors();
  const uint32_t rb = static_cast<uint32_t>(engine::vk::device_row_bytes(kType, K));
  std::vector<std::byte> w[2];
  for (int s = 0; s < 2; ++s) {
    w[s] = random_weights(kType, K, N[s], 40 + s);
    put_weights(rig, s, kType, K, N[s], w[s]);
  }
  rig.make(rig.vecs, 4);
  rig.make(rig.meta, 4);
  rig.make(rig.state, 4);
  bool ran = false;
  for (const uint32_t T : {5u, 70u}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    MmSlot probe{K, N[0], 0, 0, MmMode::kStore, 0};
    probe.h16_off = 0;
    if (!rig.kernels->writes_h16(kType, {&probe, 1}, T)) continue;  // no tensor cores here
    ran = true;
    // act: x, its fp16 form, then per slot y, y's fp16 form from the product, h16.comp's of y.
    const uint32_t x_h = T * K, y0 = x_h + T * K / 2;
    uint32_t y_off[2], yh[2], ref[2], at = y0;
    for (int s = 0; s < 2; ++s) {
      y_off[s] = at;
      yh[s] = at + T * N[s];
      ref[s] = yh[s] + T * N[s] / 2;
      at = ref[s] + T * N[s] / 2;
    }
    const std::vector<float> x = random_floats(size_t{T} * K, 8);
    std::vector<uint32_t> words[2];  // yh of the two runs
    for (const bool half_only : {false, true}) {
      rig.make(rig.act, at);
      std::memcpy(rig.act.mapped(), x.data(), x.size() * 4);
      MmSlot slots[2];
      for (int s = 0; s < 2; ++s) {
        slots[s] = {K, N[s], 0, y_off[s], s == 0 ? MmMode::kReluSq : MmMode::kStore, rb};
        slots[s].h16_off = x_h;
        slots[s].yh_off = yh[s];
        slots[s].y_half_only = half_only;
      }
      ASSERT_TRUE(rig.kernels->writes_h16(kType, slots, T));
      const VkDescriptorSet set = rig.set();
      const engine::vk::Kernels::HalfRegion in{K, 0, x_h};
      const engine::vk::Kernels::HalfRegion outs[2] = {{N[0], y_off[0], ref[0]},
                                                       {N[1], y_off[1], ref[1]}};
      rig.run([&](VkCommandBuffer cb) {
        rig.kernels->to_half(cb, set, T, {&in, 1});
        rig.kernels->compute_barrier(cb);
        rig.kernels->mm(cb, set, kType, slots, T);
        if (!half_only) {
          rig.kernels->compute_barrier(cb);
          rig.kernels->to_half(cb, set, T, outs);
        }
      });
      const auto* act = rig.ptr<uint32_t>(rig.act);
      words[half_only].assign(act + y0, act + at);
      for (int s = 0; s < 2; ++s) {
        for (uint32_t i = 0; i < T * N[s] / 2; ++i) {
          if (!half_only) {
            ASSERT_EQ(act[yh[s] + i], act[ref[s] + i]) << "slot " << s << " word " << i;
          } else {
            ASSERT_EQ(act[yh[s] + i], words[0][yh[s] - y0 + i]) << "slot " << s << " word " << i;
          }
        }
        if (half_only && T > 16) {  // mc.comp: the floats stay as rig.make left them (zeros)
          for (uint32_t i = 0; i < T * N[s]; ++i) ASSERT_EQ(act[y_off[s] + i], 0u) << i;
        }
      }
    }
  }
  if (!ran) GTEST_SKIP() << "the device runs no tensor-core products (mcd.comp, mc.comp)";
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

INSTANTIATE_TEST_SUITE_P(EveryType, VkMatmul,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                           GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,
                                           GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const auto& p) {
                           return std::string(engine::ggml_traits(p.param).name);
                         });

// The same blocks with every quantised bit cleared: each element's value at q = 0, the min term
// of its K-quant sub-block (Q4_K: nibbles; Q5_K: fifth bits and nibbles; not for Q6_K).
std::vector<std::byte> zero_quants(GgmlType t, std::vector<std::byte> w) {
  const size_t block = engine::ggml_traits(t).block_bytes, from = 16;  // after d, dmin, scales
  for (size_t b = 0; b < w.size(); b += block) {
    std::memset(&w[b + from], 0, block - from);
  }
  return w;
}

// Decode products of K-quants that read the inputs' int8 form (shaders/q8.comp, mvq.comp), on
// devices with integer dot products. First the form itself (check_q8_form), of the inputs
// (q8.comp) and of slot 0's outputs (written by the product itself). Then the product
// against a reference built from that same form: with w0 the weights' value at q = 0 (min
// term), the kernel computes sum (w - w0) * d * q + w0 * x, which is exact up to float
// summation; so the tolerance is the float one of the plain product.
class VkMatmulQ8 : public ::testing::TestWithParam<GgmlType> {};

TEST_P(VkMatmulQ8, MatchesReferenceOfItsInt8Inputs) {
  const GgmlType type = GetParam();
  VkRig rig;
  const uint64_t errors = Device::validation_errors();
  if (!rig.kernels->reads_q8(type, 1)) {
    GTEST_SKIP() << "the device has no integer dot products (or no subgroups)";
  }
  // Slot 0 also writes its output's int8 form (N % 16 == 0) where the product can: not where
  // it splits K, which the second pass forces (mvq_ksplit 2) on the same cases. The third pass
  // takes 48 rows for many (mvq_many_rows 48, a head's rule: four rows a subgroup at one
  // token), without the int8 output (whose variant keeps one row).
  const uint32_t Ns[2] = {48, 7};
  bool split = false;
  for (const int pass : {0, 1, 2}) {
    const bool many = pass == 2;
    if (pass > 0) {
      rig.retune([&](Tuning& t) {
        if (pass == 1) t.mvq_ksplit = 2;
        if (many) t.mvq_many_rows = 48;
      });
    }
    SCOPED_TRACE(pass == 0 ? "defaults" : many ? "mvq_many_rows 48" : "mvq_ksplit 2");
    EXPECT_EQ(rig.kernels->mvq_rows(1, Ns[0]), many ? 4u : 1u);
    for (const auto& [T, K] :
         {std::pair{1u, 512u}, {3u, 1280u}, {11u, 512u}, {16u, 256u}, {10u, 1024u}, {1u, 1024u}}) {
      const uint32_t parts = rig.kernels->mvq_ksplit(K);
      split = split || parts > 1;
      SCOPED_TRACE("T = " + std::to_string(T) + ", K = " + std::to_string(K) + ", K in " +
                   std::to_string(parts) + " parts");
      ASSERT_TRUE(rig.kernels->reads_q8(type, T));
      std::vector<float> wf[2], w0[2];
      for (int s = 0; s < 2; ++s) {
        const std::vector<std::byte> w = random_weights(type, K, Ns[s], 30 + s);
        wf[s].resize(size_t{K} * Ns[s]);
        w0[s].resize(wf[s].size());
        engine::dequantize(type, w.data(), wf[s].data(), static_cast<int64_t>(wf[s].size()));
        if (type != GgmlType::Q6_K) {  // Q6_K has no min term: w0 = 0
          const std::vector<std::byte> z = zero_quants(type, w);
          engine::dequantize(type, z.data(), w0[s].data(), static_cast<int64_t>(w0[s].size()));
        }
        put_weights(rig, s, type, K, Ns[s], w);
      }
      // Inputs of mixed ranges per run (a run of zeros included), as activations are.
      std::vector<float> x = random_floats(size_t{T} * K, 8);
      for (size_t i = 0; i < x.size(); ++i) x[i] *= (i / 16) % 3 == 0 ? 20.0f : 0.5f;
      std::fill(x.begin() + 32, x.begin() + 48, 0.0f);
      const uint32_t q_off = T * K, qr = engine::vk::q8_row_floats(K);
      const uint32_t y_off[2] = {q_off + T * qr, q_off + T * qr + T * Ns[0]};
      const uint32_t yq_off = (y_off[1] + T * Ns[1] + 3) / 4 * 4;  // readers load 16 bytes
      rig.make(rig.vecs, 4);
      rig.make(rig.meta, 4);
      rig.make(rig.state, 4);
      rig.make(rig.act, yq_off + T * engine::vk::q8_row_floats(Ns[0]));
      std::memcpy(rig.act.mapped(), x.data(), x.size() * 4);
      const VkDescriptorSet set = rig.set();
      MmSlot slots[2];
      for (int s = 0; s < 2; ++s) {
        slots[s] = {K,
                    Ns[s],
                    0,
                    y_off[s],
                    s == 0 ? MmMode::kStore : MmMode::kTanh,
                    static_cast<uint32_t>(engine::vk::device_row_bytes(type, K)),
                    q_off};
      }
      const bool qout = !many && rig.kernels->writes_q8(type, K, Ns[0], T);
      if (!many) {
        EXPECT_EQ(qout, parts == 1);
      }
      if (qout) slots[0].yq_off = yq_off;
      rig.run([&](VkCommandBuffer cb) {
        rig.kernels->quantize_q8(cb, set, K, T, 0, q_off);
        rig.kernels->compute_barrier(cb);
        rig.kernels->mm(cb, set, type, slots, T);
      });
      // The int8 form of the inputs, x as it represents it, and of slot 0's outputs.
      std::vector<float> xq(x.size());
      check_q8_form(rig.ptr<std::byte>(rig.act), q_off, x.data(), xq.data(), T, K);
      if (HasFatalFailure()) return;
      if (qout) {
        SCOPED_TRACE("slot 0's output");
        std::vector<float> yq(size_t{T} * Ns[0]);
        check_q8_form(rig.ptr<std::byte>(rig.act), yq_off, rig.ptr<float>(rig.act) + y_off[0],
                      yq.data(), T, Ns[0]);
        if (HasFatalFailure()) return;
      }
      for (int s = 0; s < 2; ++s) {
        for (uint32_t t = 0; t < T; ++t) {
          for (uint32_t o = 0; o < Ns[s]; ++o) {
            double y = 0, mag = 0;
            for (uint32_t i = 0; i < K; ++i) {
              const size_t wi = size_t{o} * K + i, xi = size_t{t} * K + i;
              const double term =
                  (double{wf[s][wi]} - w0[s][wi]) * xq[xi] + double{w0[s][wi]} * x[xi];
              y += term;
              mag += std::abs(double{wf[s][wi]} - w0[s][wi]) * std::abs(xq[xi]) +
                     std::abs(double{w0[s][wi]} * x[xi]);
            }
            const double tol = 2e-6 * mag + 1e-6;
            const float want = apply(slots[s].mode, static_cast<float>(y), 0);
            ASSERT_NEAR(rig.ptr<float>(rig.act)[y_off[s] + t * Ns[s] + o], want, tol)
                << "slot " << s << " t " << t << " o " << o;
          }
        }
      }
    }
  }
  // The forced pass must have split somewhere, or the split went untested here.
  if (!split) GTEST_SKIP() << "one subgroup a workgroup here: K was never split";
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

INSTANTIATE_TEST_SUITE_P(KQuants, VkMatmulQ8,
                         ::testing::Values(GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const auto& p) {
                           return std::string(engine::ggml_traits(p.param).name);
                         });

}  // namespace
}  // namespace rwkvd::test
