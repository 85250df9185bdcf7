// The WKV-7 kernels (shaders/wkv_sg.comp and the portable wkv.comp) against a CPU loop over the
// README's per-token math: two heads, two sequences of different lengths in swapped slots, a random
// starting state in the docs/STATE_LAYOUT.md layout, with and without the value residual (layer 0
// or not), and with wkv_sg doing the LoRA up products itself (kWkvLora; F32 and F16 weights) at
// two lane counts; and decode of several one-token sequences in groups per workgroup against a
// workgroup each.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/quant/half.h"
#include "tests/vk/q8_check.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::vk::Device;
using engine::vk::Tuning;
using engine::vk::TuningPatch;

float sigm(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// Sequences of one chunk: slot, first token, tokens (consecutive, in order, as the engine lays
// them out).
struct Seqs {
  std::vector<uint32_t> slot, first, n;
  uint32_t tokens() const { return first.back() + n.back(); }
};

// What one run of the kernel left: the activations and the state slots.
struct WkvResult {
  std::vector<float> act, state;
};

// Runs wkv over two heads of size N for `seqs` (their slots holding a random starting state;
// with lora, wkv does the LoRA up products of ranks {32, 24, 16, 64} itself) in a fresh rig
// (its tuning changed by `patch`: the kernel variant) and checks y, v_first, the new states and y's
// int8 form against a CPU loop over the README's per-token math. With y_half (where
// Kernels::wkv_writes_h16) y comes out as its fp16 form alone, checked to fp16's rounding.
// half_up: bit b, LoRA up weight b (w2, a2, g2, v2) is F16 (kWkvLoraHalf), as F16 files hold
// a2, g2 and v2.
WkvResult run_and_check(const TuningPatch& patch, const Seqs& seqs, uint32_t N, uint32_t layer0,
                        bool lora, bool want_q8 = true, bool y_half = false, uint32_t half_up = 0) {
  const uint32_t H = 2, T = seqs.tokens(), B = static_cast<uint32_t>(seqs.slot.size());
  const uint32_t D = H * N, layer_floats = (N + 2) * D;
  const uint32_t n_slots = *std::max_element(seqs.slot.begin(), seqs.slot.end()) + 1;
  VkRig rig(patch);
  // LoRA ranks (w, a, v, g) for the lora runs: several weight vec4 per lane of phase L.
  const uint32_t rank[4] = {32, 24, 16, 64};
  const uint32_t rank_sum = rank[0] + rank[1] + rank[2] + rank[3];
  if (lora && !rig.kernels->wkv_fuses_lora(N, rank_sum)) return {};
  const uint64_t errors = Device::validation_errors();
  rig.make(rig.meta, 4 * T + 4 * B);
  auto* meta = rig.ptr<uint32_t>(rig.meta);
  for (uint32_t s = 0; s < B; ++s) {
    meta[4 * T + 4 * s] = seqs.slot[s];
    meta[4 * T + 4 * s + 1] = seqs.first[s];
    meta[4 * T + 4 * s + 2] = seqs.n[s];
  }
  // vecs: w0, a0, v0, k_k, k_a, r_k, ln_x w, ln_x b
  const std::vector<float> vec = random_floats(8 * D, 21);
  rig.make(rig.vecs, vec.size());
  std::memcpy(rig.vecs.mapped(), vec.data(), vec.size() * 4);
  const std::vector<float> state0 = random_floats(n_slots * layer_floats, 22, -0.5f, 0.5f);
  rig.make(rig.state, state0.size());
  std::memcpy(rig.state.mapped(), state0.data(), state0.size() * 4);
  // act regions [T][D]: r, k, v, wl, al, vl, g, vf, y
  std::vector<float> act0 = random_floats(9 * T * D, 23);
  auto R = [&](uint32_t i) { return i * T * D; };
  // Then y's int8 form [T][q8_row_floats(D)] where the kernel writes one (wkv_sg.comp).
  const bool q8 = want_q8 && !y_half && rig.kernels->wkv_writes_q8(N);
  if (y_half && !rig.kernels->wkv_writes_h16(N, T)) return {};
  // (or y's fp16 form, T rows of D / 2 words)
  const uint32_t yq_off = 9 * T * D,
                 h_off = yq_off + T * std::max(engine::vk::q8_row_floats(D), D / 2);
  // With lora: the down outputs [T][rank] of w, a, v, g after the int8 form, the up weights
  // [D][rank] bound as weights 0..3 (w2, a2, g2, v2); the reference reads the products from
  // wl, al, vl, g, which the kernel gets zeroed (it must not read them).
  std::vector<float> down = random_floats(T * rank_sum, 24, -0.5f, 0.5f);
  std::vector<float> act_gpu = act0;
  if (lora) {
    const uint32_t region[4] = {3, 4, 5, 6}, binding[4] = {0, 1, 3, 2};
    uint32_t hb = 0;
    for (uint32_t m = 0; m < 4; ++m) {
      std::vector<float> up = random_floats(D * rank[m], 25 + m, -0.3f, 0.3f);
      if ((half_up >> binding[m]) & 1u) {  // the weights as fp16, the reference their values
        std::vector<uint16_t> h(up.size());
        for (size_t i = 0; i < up.size(); ++i) {
          h[i] = engine::fp32_to_fp16(up[i]);
          up[i] = engine::fp16_to_fp32(h[i]);
        }
        rig.make(rig.weights[binding[m]], (h.size() + 1) / 2);
        std::memcpy(rig.weights[binding[m]].mapped(), h.data(), h.size() * 2);
      } else {
        rig.make(rig.weights[binding[m]], up.size());
        std::memcpy(rig.weights[binding[m]].mapped(), up.data(), up.size() * 4);
      }
      for (uint32_t t = 0; t < T; ++t) {
        for (uint32_t c = 0; c < D; ++c) {
          double sum = 0;
          for (uint32_t j = 0; j < rank[m]; ++j)
            sum += up[c * rank[m] + j] * down[hb + t * rank[m] + j];
          act0[R(region[m]) + t * D + c] = static_cast<float>(sum);
          act_gpu[R(region[m]) + t * D + c] = 0;
        }
      }
      hb += T * rank[m];
    }
  }
  rig.make(rig.act, h_off + down.size());
  std::memcpy(rig.act.mapped(), act_gpu.data(), act_gpu.size() * 4);
  std::memcpy(rig.ptr<float>(rig.act) + h_off, down.data(), down.size() * 4);
  const VkDescriptorSet set = rig.set();
  engine::vk::WkvArgs a{
      D,     R(0),  R(1),  R(2),  R(3), R(4),         R(5),
      R(6),  R(7),  R(8),  0,     D,    2 * D,        3 * D,
      4 * D, 5 * D, 6 * D, 7 * D, 0,    layer_floats, layer0 != 0 ? engine::vk::kWkvLayer0 : 0u,
      4 * T};
  if (q8) a.y_q8 = yq_off;
  if (y_half) {
    a.flags |= engine::vk::kWkvYHalf;
    a.y_q8 = yq_off;
  }
  if (lora) {
    a.flags |= engine::vk::kWkvLora | half_up * engine::vk::kWkvLoraHalf;
    a.rank_w = rank[0];
    a.rank_a = rank[1];
    a.rank_v = rank[2];
    a.rank_g = rank[3];
    a.hw_off = h_off;
    a.ha_off = a.hw_off + T * rank[0];
    a.hv_off = a.ha_off + T * rank[1];
    a.hg_off = a.hv_off + T * rank[2];
  }
  rig.run([&](VkCommandBuffer cb) { rig.kernels->wkv(cb, set, a, H, N, B, T); });
  const float* act = rig.ptr<float>(rig.act);
  const float* st = rig.ptr<float>(rig.state);
  const float* P = vec.data();
  for (uint32_t s = 0; s < B; ++s) {
    const float* sb = &state0[seqs.slot[s] * layer_floats];
    for (uint32_t h = 0; h < H; ++h) {
      std::vector<double> S(N * N);  // S[i][j]
      for (uint32_t i = 0; i < N; ++i) {
        for (uint32_t j = 0; j < N; ++j) S[i * N + j] = sb[(1 + j) * D + h * N + i];
      }
      for (uint32_t tt = 0; tt < seqs.n[s]; ++tt) {
        const uint32_t t = seqs.first[s] + tt;
        std::vector<double> r(N), w(N), k(N), v(N), a_(N), kk(N), g(N);
        double ss = 0, bonus = 0;
        for (uint32_t i = 0; i < N; ++i) {
          const uint32_t c = h * N + i, o = t * D + c;
          r[i] = act0[R(0) + o];
          w[i] = std::exp(-0.606531 * sigm(P[c] + act0[R(3) + o]));
          a_[i] = sigm(P[D + c] + act0[R(4) + o]);
          v[i] = act0[R(2) + o];
          if (layer0 == 0) {
            v[i] += (act0[R(7) + o] - v[i]) * sigm(P[2 * D + c] + act0[R(5) + o]);
          }
          const double k0 = act0[R(1) + o];
          kk[i] = k0 * P[3 * D + c];
          ss += kk[i] * kk[i];
          k[i] = k0 * (1 + (a_[i] - 1) * P[4 * D + c]);
          bonus += r[i] * k[i] * P[5 * D + c];
          g[i] = act0[R(6) + o];
        }
        for (auto& x : kk) x /= std::max(std::sqrt(ss), 1e-12);
        std::vector<double> y(N);
        for (uint32_t i = 0; i < N; ++i) {
          double sa = 0;
          for (uint32_t j = 0; j < N; ++j) sa -= S[i * N + j] * kk[j];
          for (uint32_t j = 0; j < N; ++j) {
            S[i * N + j] = S[i * N + j] * w[j] + sa * kk[j] * a_[j] + v[i] * k[j];
            y[i] += S[i * N + j] * r[j];
          }
        }
        double mu = 0, var = 0;
        for (double x : y) mu += x / N;
        for (double x : y) var += (x - mu) * (x - mu) / N;
        for (uint32_t i = 0; i < N; ++i) {
          const uint32_t c = h * N + i, o = t * D + c;
          const double yn = (y[i] - mu) / std::sqrt(var + 64e-5) * P[6 * D + c] + P[7 * D + c];
          const double want = (yn + v[i] * bonus) * g[i];
          // The fp16 form holds y / 256 (common.glsl's kInScale) to half an fp16 ulp.
          const double got =
              y_half ? engine::fp16_to_fp32(rig.ptr<uint16_t>(rig.act)[2 * yq_off + o]) * 256.0
                     : act[R(8) + o];
          EXPECT_NEAR(got, want, 1e-4 * (1 + std::abs(want)) + (y_half ? 5e-4 * std::abs(want) : 0))
              << "layer0 " << layer0 << " seq " << s << " head " << h << " t " << t << " i " << i;
          if (layer0 == 1) {
            EXPECT_EQ(act[R(7) + o], act0[R(2) + o]);  // v_first written
          }
          if (::testing::Test::HasFailure()) return {};
        }
      }
      const float* sn = &st[seqs.slot[s] * layer_floats];
      for (uint32_t i = 0; i < N; ++i) {
        for (uint32_t j = 0; j < N; ++j) {
          EXPECT_NEAR(sn[(1 + j) * D + h * N + i], S[i * N + j],
                      1e-4 * (1 + std::abs(S[i * N + j])))
              << "state seq " << s << " head " << h << " i " << i << " j " << j;
          if (::testing::Test::HasFailure()) return {};
        }
      }
    }
  }
  if (q8) {
    SCOPED_TRACE("y's int8 form");
    std::vector<float> yq(T * D);
    check_q8_form(rig.ptr<std::byte>(rig.act), yq_off, act + R(8), yq.data(), T, D);
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
  return {std::vector<float>(act, act + h_off), std::vector<float>(st, st + state0.size())};
}

TEST(VkWkv, MatchesCpuRecurrence) {
  // 20 tokens span three of wkv_sg's 8-token blocks (two of the long variant's 12), the last one
  // partial; head sizes 64 and 32; two sequences of different lengths in swapped slots.
  const Seqs seqs{{1, 0}, {0, 3}, {3, 20}};
  for (const uint32_t run : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 11u, 12u}) {
    const uint32_t layer0 = run & 1u;
    // Runs 11 and 12: y's fp16 form alone (kWkvYHalf), with and without the LoRA up phase.
    const bool y_half = run >= 11;
    const bool portable = run == 2 || run == 3,
               lora = run == 5 || run == 6 || (run >= 9 && run != 12);
    const bool longv = run == 7 || run == 8;
    // Runs 9 and 10: F16 LoRA up weights, all four (layer 0, 4 lanes a channel), and mixed as F16
    // files hold them (a2, g2, v2 F16, w2 F32).
    const uint32_t half_up = run == 9 ? 0b1111u : run == 10 ? 0b1110u : 0u;
    const uint32_t N = run == 4 || run == 8 ? 32 : 64;
    SCOPED_TRACE(std::string(portable ? "wkv.comp" : "wkv_sg.comp (where supported)") + " layer0 " +
                 std::to_string(layer0) + " head size " + std::to_string(N) +
                 (lora ? " LoRA up inside" : "") + (half_up != 0 ? " (F16 weights)" : "") +
                 (longv ? " long-chunk variant" : "") + (y_half ? " y in fp16" : ""));
    const auto variant = [&](Tuning& t) {
      t.wkv_portable = portable;
      if (run == 6 || run == 9) t.wkv_lanes = 4;  // run 5: the default (8 where it fits)
      if (longv) {  // the long-chunk variant at these 23 tokens: 16 lanes a channel, 12-token
                    // blocks
        t.wkv_long_t = 1;
        t.wkv_long_block = 12;
      }
    };
    run_and_check(variant, seqs, N, layer0, lora, true, y_half, half_up);
    if (HasFailure()) return;
  }
}

// Decode of several sequences (one token each): groups of them share a workgroup per head
// (wkv_sg.comp GROUPS), each with its own state, and must compute exactly what a workgroup per
// sequence does. Seven sequences in shuffled slots, in groups of 2 (at most 2: 2, 2, 2, 1) and of
// 4 (at most 8, but Kernels::wkv makes two groups: 4, 3), phase B taking a group's sequences two
// (8 invocations a channel) or one (4) at a time.
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t diffs = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // Bit patterns: the int8 form's words are not floats (some read as NaN).
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && diffs++ == 0) {
      first = i;
    }
  }
  EXPECT_EQ(diffs, 0u) << what << " differ from a workgroup per sequence in " << diffs
                       << " places, the first at " << first << ": " << got[first] << " against "
                       << want[first];
}

TEST(VkWkv, GroupsOfOneTokenSequences) {
  Seqs seqs;
  for (uint32_t s = 0; s < 7; ++s) {
    seqs.slot.push_back((s * 3 + 2) % 7);
    seqs.first.push_back(s);
    seqs.n.push_back(1);
  }
  for (const uint32_t layer0 : {0u, 1u}) {
    for (const uint32_t lanes : {8u, 4u}) {
      const auto grouping = [&](uint32_t group) {
        return [=](Tuning& t) {
          t.wkv_lanes = lanes;
          t.wkv_group = group;
        };
      };
      const WkvResult one = run_and_check(grouping(1), seqs, 64, layer0, true);
      if (HasFailure()) return;
      if (one.act.empty()) GTEST_SKIP() << "this device's wkv does not do the LoRA up products";
      for (const uint32_t group : {2u, 8u}) {
        SCOPED_TRACE("groups of at most " + std::to_string(group) + ", " + std::to_string(lanes) +
                     " invocations a channel, layer0 " + std::to_string(layer0));
        const WkvResult grouped = run_and_check(grouping(group), seqs, 64, layer0, true);
        if (HasFailure()) return;
        expect_same(grouped.act, one.act, "activations");
        expect_same(grouped.state, one.state, "states");
      }
    }
  }
}

// A long chunk on wkv_long.comp (phases A and B pipelined, then wkv_out.comp), its heads' state
// rows in 1, 2, 4 or 8 workgroups each: each against the CPU loop, and exactly what wkv_sg.comp
// computes (its long variant, one workgroup per (head, sequence)): y, v_first and the states
// (the v region then holds v * bonus).
TEST(VkWkv, LongChunksPipelinedAndInRowSlices) {
  const Seqs seqs{{1, 0}, {0, 3}, {3, 40}};  // 43 tokens: four 12-token blocks, the last partial
  const uint32_t N = 64, T = seqs.tokens(), D = 2 * N;
  // Every chunk long, 12-token blocks; wkv_sg.comp's long variant, or wkv_long.comp in slices.
  const auto long_chunks = [](bool pipelined, uint32_t slices) {
    return [=](Tuning& t) {
      t.wkv_long_t = 1;
      t.wkv_long_block = 12;
      t.wkv_pipelined = pipelined;
      t.wkv_slices = slices;
    };
  };
  const auto vf_y = [&](const WkvResult& r) {  // act regions [T][D] 7 and 8: v_first and y
    return std::vector<float>(r.act.begin() + 7 * T * D, r.act.begin() + 9 * T * D);
  };
  for (const uint32_t layer0 : {0u, 1u}) {
    const WkvResult one = run_and_check(long_chunks(false, 0), seqs, N, layer0, false, false);
    if (HasFailure()) break;
    for (const uint32_t slices : {1u, 2u, 4u, 8u}) {
      SCOPED_TRACE("wkv_long.comp, " + std::to_string(slices) + " row slices, layer0 " +
                   std::to_string(layer0));
      const auto variant = long_chunks(true, slices);
      const WkvResult got = run_and_check(variant, seqs, N, layer0, false, false);
      if (HasFailure()) break;
      expect_same(vf_y(got), vf_y(one), "v_first and y");
      expect_same(got.state, one.state, "states");
      // y's fp16 form alone (kWkvYHalf, for the output product), where this device can.
      const WkvResult half = run_and_check(variant, seqs, N, layer0, false, false, true);
      if (HasFailure()) break;
      if (half.state.empty()) {
        std::printf("[ y fp16   ] this device's wkv writes no fp16 form of y\n");
      } else {
        expect_same(half.state, one.state, "states, y in fp16");
      }
    }
  }
}

}  // namespace
}  // namespace rwkvd::test
