// SafeTensors inputs: the tiny fixture model written back under BlinkDL's PyTorch names (as a
// .pth holds them) and in web-rwkv's layout, converted, and compared with the fixture GGUFs.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "engine/convert/emit.h"
#include "engine/convert/rwkv7_names.h"
#include "engine/convert/safetensors.h"
#include "engine/convert/type_policy.h"
#include "engine/error.h"
#include "engine/gguf.h"
#include "tests/engine/convert_files.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine::convert {
namespace {

using testing::bf16_of;
using testing::blinkdl_from_gguf;
using testing::encode;
using testing::floats_of;
using testing::OwnedTensors;
using testing::temp_path;

std::vector<std::byte> emitted(const MappedTensor& t, GgmlType type) {
  std::vector<std::byte> out;
  emit_tensor(t, type,
              [&](std::span<const std::byte> b) { out.insert(out.end(), b.begin(), b.end()); });
  return out;
}

// Writes `tensors` (in reverse order: readers must not rely on order) and plans the file.
Rwkv7Plan plan_st(const std::string& file, const OwnedTensors& t,
                  const std::map<std::string, std::string>& meta = {},
                  std::unique_ptr<SourceModel>* keep = nullptr) {
  std::vector<SourceTensor> reversed(t.tensors.rbegin(), t.tensors.rend());
  testing::write_file(temp_path(file), testing::safetensors_bytes(reversed, meta));
  auto model = std::make_unique<SourceModel>(read_safetensors(temp_path(file).string()));
  auto plan = plan_rwkv7(*model);
  if (keep) *keep = std::move(model);
  return plan;
}

// `rounded`: tensors that went through F16 on the way (a web-rwkv file is all F16) but are
// written F32; they must equal the fixture's values rounded to F16.
void expect_same_tensors(const Rwkv7Plan& plan, QuantFtype file_type, const GgufFile& want,
                         const std::set<std::string>& rounded = {}) {
  ASSERT_EQ(plan.tensors.size(), want.tensors().size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& t = plan.tensors[i];
    SCOPED_TRACE(t.name);
    const auto& w = want.tensors()[i];
    ASSERT_EQ(t.name, w.name);
    ASSERT_EQ(t.ne.size(), w.n_dims);
    for (size_t d = 0; d < t.ne.size(); ++d) EXPECT_EQ(t.ne[d], w.ne[d]);
    EXPECT_EQ(tensor_type(t, file_type), w.type);
    std::vector<std::byte> expected(w.data.begin(), w.data.end());
    if (rounded.count(t.name)) {
      const auto h = encode(floats_of(w.data), SourceDtype::F16);
      const SourceTensor f16{t.name, {w.n_elements()}, SourceDtype::F16, h};
      expected = emitted(MappedTensor{t.name, t.ne, MapOp::kCopy, {&f16}}, GgmlType::F32);
    }
    const auto got = emitted(t, w.type);
    ASSERT_EQ(got.size(), w.data.size());
    EXPECT_TRUE(got == expected) << "bytes differ";
  }
}

constexpr const char* kF32 = "rwkv7/tiny-rwkv7-834K.f32.gguf";
constexpr const char* kF16 = "rwkv7/tiny-rwkv7-834K.f16.gguf";

TEST(ConvertSafetensors, PytorchNamesAndLayoutF32) {
  RWKVD_FIXTURE(f32, kF32);
  const auto want = GgufFile::open(f32.string());
  const auto st = blinkdl_from_gguf(*want, /*pytorch=*/true, SourceDtype::F32);
  std::unique_ptr<SourceModel> keep;
  const auto plan = plan_st("pytorch-f32.st", st, {}, &keep);
  EXPECT_EQ(plan.lora_layout, LoraLayout::kPytorch);  // decided from the shapes
  expect_same_tensors(plan, QuantFtype::F32, *want);
}

TEST(ConvertSafetensors, PytorchLayoutAsF16MatchesF16Fixture) {
  RWKVD_FIXTURE(f32, kF32);
  RWKVD_FIXTURE(f16, kF16);
  const auto st = blinkdl_from_gguf(*GgufFile::open(f32.string()), true, SourceDtype::F32);
  std::unique_ptr<SourceModel> keep;
  expect_same_tensors(plan_st("pytorch-f32b.st", st, {}, &keep), QuantFtype::F16,
                      *GgufFile::open(f16.string()));
}

// web-rwkv's convert_safetensors.py: everything F16, LoRAs transposed, {"format": "pt"}. The
// matrices match the F16 fixture exactly; what llama.cpp keeps F32 (vectors, w1/w2, lerps) can
// only be the F16-rounded values here.
TEST(ConvertSafetensors, WebRwkvLayoutF16) {
  RWKVD_FIXTURE(f32, kF32);
  RWKVD_FIXTURE(f16, kF16);
  const auto want = GgufFile::open(f16.string());
  const auto st = blinkdl_from_gguf(*GgufFile::open(f32.string()), false, SourceDtype::F16);
  std::unique_ptr<SourceModel> keep;
  const auto plan = plan_st("web-rwkv.st", st, {{"format", "pt"}}, &keep);
  EXPECT_EQ(plan.lora_layout, LoraLayout::kTransposed);
  std::set<std::string> kept_f32;
  for (const auto& t : plan.tensors) {
    if (tensor_type(t, QuantFtype::F16) == GgmlType::F32) kept_f32.insert(t.name);
  }
  expect_same_tensors(plan, QuantFtype::F16, *want, kept_f32);
}

// BF16 widens to F32 exactly: the F32 output is the fixture rounded to BF16.
TEST(ConvertSafetensors, Bf16WidensExactly) {
  RWKVD_FIXTURE(f32, kF32);
  const auto want = GgufFile::open(f32.string());
  const auto st = blinkdl_from_gguf(*want, true, SourceDtype::BF16);
  std::unique_ptr<SourceModel> keep;
  const auto plan = plan_st("bf16.st", st, {}, &keep);
  for (const auto& t : plan.tensors) {
    const auto got = floats_of(emitted(t, GgmlType::F32));
    const auto ref = floats_of(want->tensor(t.name).data);
    ASSERT_EQ(got.size(), ref.size()) << t.name;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), uint32_t{bf16_of(ref[i])} << 16) << t.name;
    }
  }
}

TEST(ConvertSafetensors, LayoutHintMustFitTheShapes) {
  RWKVD_FIXTURE(f32, kF32);
  const auto st = blinkdl_from_gguf(*GgufFile::open(f32.string()), true, SourceDtype::F32);
  std::string msg;
  try {
    plan_st("hint.st", st, {{"rwkvd.lora_layout", "transposed"}});
  } catch (const EngineError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("blocks.0.att.w1 has shape [64, 32], expected [rank, 64] (transposed"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace rwkvd::engine::convert
