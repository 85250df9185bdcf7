// `rwkvd convert` against the fixtures: rwkv.cpp's tiny model converted by an independent tool
// is the reference, tensor by tensor (names, shapes, types, bytes) and key by key.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/convert/emit.h"
#include "engine/convert/rwkv7_names.h"
#include "engine/convert/rwkvcpp_bin.h"
#include "engine/convert/type_policy.h"
#include "engine/gguf.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine::convert {
namespace {

std::vector<std::byte> emitted(const MappedTensor& t, GgmlType type) {
  std::vector<std::byte> out;
  emit_tensor(t, type,
              [&](std::span<const std::byte> b) { out.insert(out.end(), b.begin(), b.end()); });
  return out;
}

// Every planned tensor equals the fixture's (same order too), except those in `skip`.
void expect_plan_equals(const Rwkv7Plan& plan, QuantFtype file_type, const GgufFile& want,
                        const std::set<std::string>& skip = {}) {
  ASSERT_EQ(plan.tensors.size(), want.tensors().size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& t = plan.tensors[i];
    const auto& w = want.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w.name);
    ASSERT_EQ(t.ne.size(), w.n_dims);
    for (size_t d = 0; d < t.ne.size(); ++d) EXPECT_EQ(t.ne[d], w.ne[d]);
    const GgmlType type = tensor_type(t, file_type);
    EXPECT_EQ(type, w.type);
    if (skip.count(t.name)) continue;
    const auto got = emitted(t, type);
    ASSERT_EQ(got.size(), w.data.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), w.data.begin())) << "bytes differ";
  }
}

TEST(ConvertPlan, RwkvCppFp32MatchesF32Fixture) {
  RWKVD_FIXTURE(bin, "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP32.bin");
  RWKVD_FIXTURE(gguf, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const auto src = read_rwkvcpp_bin(bin.string());
  const auto plan = plan_rwkv7(src);
  EXPECT_EQ(plan.dims.n_layer, 12);
  EXPECT_EQ(plan.dims.n_embd, 64);
  EXPECT_EQ(plan.dims.n_vocab, 256);
  EXPECT_EQ(plan.dims.n_ffn, 256);
  EXPECT_EQ(plan.dims.head_size, 64);
  EXPECT_EQ(plan.dims.rank_w, 32);
  EXPECT_EQ(plan.dims.rank_v, 32);
  expect_plan_equals(plan, QuantFtype::F32, *GgufFile::open(gguf.string()));
}

TEST(ConvertPlan, RwkvCppFp32AsF16MatchesF16Fixture) {
  RWKVD_FIXTURE(bin, "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP32.bin");
  RWKVD_FIXTURE(gguf, "rwkv7/tiny-rwkv7-834K.f16.gguf");
  const auto src = read_rwkvcpp_bin(bin.string());
  expect_plan_equals(plan_rwkv7(src), QuantFtype::F16, *GgufFile::open(gguf.string()));
}

// rwkv.cpp's FP16 file was rounded from the FP32 one, so it converts to the F16 fixture exactly,
// except time_mix_w1/w2: llama.cpp keeps those F32, and the FP16 file only has them rounded.
TEST(ConvertPlan, RwkvCppFp16MatchesF16FixtureUpToRoundedDecayLora) {
  RWKVD_FIXTURE(bin, "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP16.bin");
  RWKVD_FIXTURE(gguf, "rwkv7/tiny-rwkv7-834K.f16.gguf");
  const auto src = read_rwkvcpp_bin(bin.string());
  const auto plan = plan_rwkv7(src);
  const auto want = GgufFile::open(gguf.string());
  std::set<std::string> decay;
  for (const auto& t : plan.tensors) {
    if (t.name.find("time_mix_w1") != std::string::npos ||
        t.name.find("time_mix_w2") != std::string::npos) {
      decay.insert(t.name);
    }
  }
  ASSERT_EQ(decay.size(), 24u);
  expect_plan_equals(plan, QuantFtype::F16, *want, decay);
  for (const auto& t : plan.tensors) {
    if (!decay.count(t.name)) continue;
    // What the FP16 file holds is the fixture's F32 values rounded to F16.
    const auto& w = want->tensor(t.name);
    const SourceTensor fixture_values{t.name, {w.n_elements()}, SourceDtype::F32, w.data};
    const MappedTensor rounded{t.name, t.ne, MapOp::kCopy, {&fixture_values}};
    EXPECT_EQ(emitted(t, GgmlType::F16), emitted(rounded, GgmlType::F16)) << t.name;
  }
}

}  // namespace
}  // namespace rwkvd::engine::convert
