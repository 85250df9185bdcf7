// A device kept across model loads (engine/vk/context.h): models opened on one context, one after
// another and at the same time, give the bits a backend with a device of its own gives; a load on
// a kept device makes no device and, for a model whose types it has seen, no pipelines.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/fixtures.h"
#include "tests/vk/backend_harness.h"

namespace rwkvd::engine {
namespace {

class VkContextTest : public test::VkBackendTest {};

std::unique_ptr<VkBackend> open_on(const std::shared_ptr<VkContext>& ctx,
                                   const std::filesystem::path& p) {
  BackendOptions o;
  o.n_slots = 1;
  return make_vk_backend(Rwkv7Model::load(p.string()), o, ctx);
}

TEST_F(VkContextTest, ModelsOnAKeptDeviceGiveWhatTheirOwnDevicesGive) {
  RWKVD_FIXTURE(tiny, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  RWKVD_FIXTURE(synth, "rwkv7/synthetic-A.q4_k_m.gguf");
  const std::vector<int32_t> toks{34, 105, 110, 7};
  std::vector<float> want_tiny, want_synth;
  {
    auto own = test::gpu(tiny);
    EXPECT_GT(own->load_stats().device_ms, 0.0);  // its device was made by this load
    want_tiny = test::run_one(*own, toks, OutputMode::kAllLogits);
  }
  want_synth = test::run_one(*test::gpu(synth), toks, OutputMode::kAllLogits);

  const std::shared_ptr<VkContext> ctx = make_vk_context();
  auto a = open_on(ctx, tiny);
  EXPECT_EQ(a->load_stats().device_ms, 0.0);
  EXPECT_EQ(a->load_stats().pipeline_cache_ms, 0.0);
  const size_t pipelines_after_a = a->pipelines_made();
  EXPECT_EQ(test::run_one(*a, toks, OutputMode::kAllLogits), want_tiny);

  {  // the same model again beside the first: its pipelines are all there already
    auto again = open_on(ctx, tiny);
    EXPECT_EQ(again->pipelines_made(), pipelines_after_a);
    EXPECT_EQ(test::run_one(*again, toks, OutputMode::kAllLogits), want_tiny);
  }
  // Another model on the same device while the first is open, then the first again: neither
  // disturbs the other's weights or states.
  auto b = open_on(ctx, synth);
  EXPECT_EQ(test::run_one(*b, toks, OutputMode::kAllLogits), want_synth);
  EXPECT_EQ(test::run_one(*a, toks, OutputMode::kAllLogits), want_tiny);
  a.reset();  // the context outlives the backends on it, not the other way round
  EXPECT_EQ(test::run_one(*b, toks, OutputMode::kAllLogits), want_synth);
}

}  // namespace
}  // namespace rwkvd::engine
