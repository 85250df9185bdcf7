// The WKV-7 kernels (shaders/wkv_sg.comp and the portable wkv.comp) against a CPU loop over the
// README's per-token math: two heads, two sequences of different lengths in swapped slots, a random
// starting state in the docs/STATE_LAYOUT.md layout, with and without the value residual (layer 0
// or not).
#include <cmath>
#include <cstring>
#include <string>

#include "tests/vk/q8_check.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::vk::Device;

float sigm(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

TEST(VkWkv, MatchesCpuRecurrence) {
  // 20 tokens span three of wkv_sg's 8-token blocks, the last one partial; head sizes 64 and 32.
  const uint32_t H = 2, T = 23;
  const uint32_t seq_slot[2] = {1, 0}, seq_first[2] = {0, 3}, seq_n[2] = {3, 20};
  for (const uint32_t run : {0u, 1u, 2u, 3u, 4u}) {
    const uint32_t layer0 = run & 1u;
    const bool portable = run == 2 || run == 3;
    const uint32_t N = run == 4 ? 32 : 64, D = H * N, layer_floats = (N + 2) * D;
    SCOPED_TRACE(std::string(portable ? "wkv.comp" : "wkv_sg.comp (where supported)") + " layer0 " +
                 std::to_string(layer0) + " head size " + std::to_string(N));
    if (portable) setenv("RWKVD_VK_WKV_PORTABLE", "1", 1);
    VkRig rig;
    unsetenv("RWKVD_VK_WKV_PORTABLE");
    const uint64_t errors = Device::validation_errors();
    rig.make(rig.meta, 4 * T + 8);
    auto* meta = rig.ptr<uint32_t>(rig.meta);
    for (uint32_t s = 0; s < 2; ++s) {
      meta[4 * T + 4 * s] = seq_slot[s];
      meta[4 * T + 4 * s + 1] = seq_first[s];
      meta[4 * T + 4 * s + 2] = seq_n[s];
    }
    // vecs: w0, a0, v0, k_k, k_a, r_k, ln_x w, ln_x b
    const std::vector<float> vec = random_floats(8 * D, 21);
    rig.make(rig.vecs, vec.size());
    std::memcpy(rig.vecs.mapped(), vec.data(), vec.size() * 4);
    const std::vector<float> state0 = random_floats(2 * layer_floats, 22, -0.5f, 0.5f);
    rig.make(rig.state, state0.size());
    std::memcpy(rig.state.mapped(), state0.data(), state0.size() * 4);
    // act regions [T][D]: r, k, v, wl, al, vl, g, vf, y
    const std::vector<float> act0 = random_floats(9 * T * D, 23);
    // Then y's int8 form [T][q8_row_floats(D)] where the kernel writes one (wkv_sg.comp).
    const bool q8 = rig.kernels->wkv_writes_q8(N);
    const uint32_t yq_off = 9 * T * D;
    rig.make(rig.act, act0.size() + T * engine::vk::q8_row_floats(D));
    std::memcpy(rig.act.mapped(), act0.data(), act0.size() * 4);
    auto R = [&](uint32_t i) { return i * T * D; };
    const VkDescriptorSet set = rig.set();
    engine::vk::WkvArgs a{
        D, R(0),  R(1),  R(2),  R(3),  R(4),  R(5),  R(6), R(7),         R(8),   0,
        D, 2 * D, 3 * D, 4 * D, 5 * D, 6 * D, 7 * D, 0,    layer_floats, layer0, 4 * T};
    if (q8) a.y_q8 = yq_off;
    rig.run([&](VkCommandBuffer cb) { rig.kernels->wkv(cb, set, a, H, N, 2); });
    const float* act = rig.ptr<float>(rig.act);
    const float* st = rig.ptr<float>(rig.state);
    const float* P = vec.data();
    for (uint32_t s = 0; s < 2; ++s) {
      const float* sb = &state0[seq_slot[s] * layer_floats];
      for (uint32_t h = 0; h < H; ++h) {
        std::vector<double> S(N * N);  // S[i][j]
        for (uint32_t i = 0; i < N; ++i) {
          for (uint32_t j = 0; j < N; ++j) S[i * N + j] = sb[(1 + j) * D + h * N + i];
        }
        for (uint32_t tt = 0; tt < seq_n[s]; ++tt) {
          const uint32_t t = seq_first[s] + tt;
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
            ASSERT_NEAR(act[R(8) + o], want, 1e-4 * (1 + std::abs(want)))
                << "layer0 " << layer0 << " seq " << s << " head " << h << " t " << t << " i " << i;
            if (layer0 == 1) {
              ASSERT_EQ(act[R(7) + o], act0[R(2) + o]);  // v_first written
            }
          }
        }
        const float* sn = &st[seq_slot[s] * layer_floats];
        for (uint32_t i = 0; i < N; ++i) {
          for (uint32_t j = 0; j < N; ++j) {
            ASSERT_NEAR(sn[(1 + j) * D + h * N + i], S[i * N + j],
                        1e-4 * (1 + std::abs(S[i * N + j])))
                << "state seq " << s << " head " << h << " i " << i << " j " << j;
          }
        }
      }
    }
    if (q8) {
      SCOPED_TRACE("y's int8 form");
      std::vector<float> yq(T * D);
      check_q8_form(rig.ptr<std::byte>(rig.act), yq_off, act + R(8), yq.data(), T, D);
      if (HasFatalFailure()) return;
    }
    RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
  }
}

}  // namespace
}  // namespace rwkvd::test
