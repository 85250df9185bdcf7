// The CPU reference against independent implementations (fixtures/rwkv7/README.md).
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/backend.h"
#include "tests/support/backend_checks.h"
#include "tests/support/compare.h"
#include "tests/support/fixture_bounds.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine {
namespace {

using test::compare_rows;
using test::long_prompt;
using test::run_one;

std::unique_ptr<Backend> cpu(const std::filesystem::path& p, uint32_t chunk = 256,
                             uint32_t slots = 1) {
  BackendOptions o;
  o.max_chunk = chunk;
  o.n_slots = slots;
  return make_cpu_backend(Rwkv7Model::load(p.string()), o);
}

// Exact-weight paths (F32 files, and F16 weights, which widen exactly): arithmetic order is the
// only difference. The README measures llama.cpp at 2.4e-7 from PyTorch on the tiny model and
// 9.5e-7 between its own batched and one-token runs; on synthetic-A 4.6e-6 from a float64
// reference and 6.8e-6 batched vs one-token, and calls ~1e-5 realistic. We measured 4.8e-7
// (tiny) and 8.7e-6 (synthetic-A, vs float64).
constexpr double kTinyTol = 1e-6;
constexpr double kSyntheticTol = 1.5e-5;

TEST(CpuForward, TinyMatchesPytorchLogits) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  RWKVD_FIXTURE(ref, "rwkv7/tiny-rwkv7-834K.in.pytorch.logits.f32.bin");
  const std::vector<int32_t> toks{34, 105, 110};
  for (const char* variant : {"f32", "f16"}) {
    auto b = cpu(test::fixtures_root() / "rwkv7" /
                 (std::string("tiny-rwkv7-834K.") + variant + ".gguf"));
    const auto d =
        compare_rows(run_one(*b, toks, OutputMode::kLastLogits), test::read_f32_file(ref), 256);
    std::printf("tiny %s vs PyTorch: %s\n", variant, d.str().c_str());
    EXPECT_LT(d.max_abs, kTinyTol) << variant;
  }
}

TEST(CpuForward, TinyText200MatchesLlamaAllPositions) {
  RWKVD_FIXTURE(prompt, "rwkv7/tiny-rwkv7-834K.text200.txt");
  const auto toks = test::text200_tokens();
  for (const std::string variant : {"f32", "f16"}) {
    const auto dir = test::fixtures_root() / "rwkv7";
    auto b = cpu(dir / ("tiny-rwkv7-834K." + variant + ".gguf"), 64);
    const auto lg = compare_rows(
        run_one(*b, toks, OutputMode::kAllLogits),
        test::read_f32_file(dir / ("tiny-rwkv7-834K." + variant + ".text200.llama.logits.f32.bin")),
        256);
    const auto em = compare_rows(
        run_one(*b, toks, OutputMode::kAllEmbeddings),
        test::read_f32_file(dir / ("tiny-rwkv7-834K." + variant + ".text200.llama.embd.f32.bin")),
        64);
    std::printf("tiny %s text200 logits: %s\n  embd: %s\n", variant.c_str(), lg.str().c_str(),
                em.str().c_str());
    EXPECT_LT(lg.max_abs, kTinyTol);
    EXPECT_LT(em.max_abs, kTinyTol);
  }
}

using test::VariantBounds;

class SyntheticA : public ::testing::TestWithParam<VariantBounds> {};

TEST_P(SyntheticA, MatchesLlamaLogitsAndEmbeddingsEveryPosition) {
  const VariantBounds v = GetParam();
  const std::string stem = std::string("synthetic-A.") + v.name;
  RWKVD_FIXTURE(model, "rwkv7/" + stem + ".gguf");
  const auto dir = test::fixtures_root() / "rwkv7";
  const auto toks = test::manifest_tokens(stem + ".seq64.llama.logits.f32.bin");
  auto b = cpu(model, 16);
  const auto lg =
      compare_rows(run_one(*b, toks, OutputMode::kAllLogits),
                   test::read_f32_file(dir / (stem + ".seq64.llama.logits.f32.bin")), 1024);
  const auto em =
      compare_rows(run_one(*b, toks, OutputMode::kAllEmbeddings),
                   test::read_f32_file(dir / (stem + ".seq64.llama.embd.f32.bin")), 256);
  std::printf("%s logits: %s\n  embd: %s\n", stem.c_str(), lg.str().c_str(), em.str().c_str());
  test::expect_within(v, lg, em);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, SyntheticA,
                         ::testing::ValuesIn(test::synthetic_a_bounds(kSyntheticTol, 2e-6)),
                         [](const auto& p) { return std::string(p.param.name); });

// Chunking and batching change only the order of float additions.
constexpr double kReorderTol = 1e-5;

TEST(CpuForward, AnyChunkSizeGivesTheSameResult) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_0.gguf");
  test::expect_same_for_any_chunk([&](uint32_t chunk) { return cpu(model, chunk); },
                                  long_prompt(300, 1024), {1u, 7u, 64u, 256u}, kReorderTol);
}

TEST(CpuForward, BatchEqualsSequencesAlone) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q8_0.gguf");
  auto b = cpu(model, 8, 4);
  test::expect_batch_equals_alone(*b, {1, 17, 64, 5}, kReorderTol);
}

TEST(CpuForward, ArgmaxOutputIsTheLogitsArgmax) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q8_0.gguf");
  auto b = cpu(model, 4, 3);
  test::expect_argmax_of_last_logits(*b);
}

TEST(CpuForward, StateRoundTripContinuesExactly) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.f32.gguf");
  auto b = cpu(model, 256, 3);
  const auto state = test::expect_state_round_trip_exact(*b, long_prompt(40, 1024), 25);
  EXPECT_EQ(state.size(), 3u * (64 + 2) * 256);
}

TEST(CpuForward, RejectsBadInputWithoutTouchingState) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.f32.gguf");
  auto b = cpu(model, 256, 2);
  test::expect_rejects_bad_input(*b);
}

}  // namespace
}  // namespace rwkvd::engine
