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

using testing::OwnedTensors;
using testing::temp_path;

std::vector<float> floats_of(std::span<const std::byte> b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), b.size());
  return f;
}

// float32 -> bfloat16, round to nearest even (finite values only, as the fixture has).
uint16_t bf16_of(float f) {
  const auto bits = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

std::vector<std::byte> encode(const std::vector<float>& f, SourceDtype dtype) {
  if (dtype == SourceDtype::F32) {
    std::vector<std::byte> out(f.size() * 4);
    std::memcpy(out.data(), f.data(), out.size());
    return out;
  }
  std::vector<uint16_t> h(f.size());
  if (dtype == SourceDtype::BF16) {
    for (size_t i = 0; i < f.size(); ++i) h[i] = bf16_of(f[i]);
  } else {
    // F16 through the converter's own rounding, checked against numpy's by convert_test.
    const SourceTensor src{"",
                           {static_cast<int64_t>(f.size())},
                           SourceDtype::F32,
                           std::as_bytes(std::span<const float>(f))};
    const MappedTensor t{"", {static_cast<int64_t>(f.size())}, MapOp::kCopy, {&src}};
    size_t at = 0;
    emit_tensor(t, GgmlType::F16, [&](std::span<const std::byte> b) {
      std::memcpy(reinterpret_cast<std::byte*>(h.data()) + at, b.data(), b.size());
      at += b.size();
    });
  }
  std::vector<std::byte> out(h.size() * 2);
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

std::vector<float> transpose(const std::vector<float>& f, int64_t rows, int64_t cols) {
  std::vector<float> out(f.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = f[static_cast<size_t>(r * cols + c)];
  }
  return out;
}

// The fixture GGUF's tensors under BlinkDL's names and shapes: the inverse of the mapping.
// `pytorch` keeps LoRAs as BlinkDL's model does, (in, out); otherwise as web-rwkv writes them.
OwnedTensors blinkdl_from_gguf(const GgufFile& g, bool pytorch, SourceDtype dtype) {
  OwnedTensors out;
  const int64_t D = g.tensor("token_embd.weight").ne[0];
  const int64_t n_layer = g.get_u32("rwkv7.block_count");
  auto put = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> f) {
    out.add(name, std::move(shape), dtype, encode(f, dtype));
  };
  auto vec = [&](const std::string& gguf) { return floats_of(g.tensor(gguf).data); };
  auto mat = [&](const std::string& name, const std::string& gguf) {
    const auto& t = g.tensor(gguf);
    put(name, {t.ne[1], t.ne[0]}, floats_of(t.data));
  };
  auto lora = [&](const std::string& name, const std::string& gguf) {
    const auto& t = g.tensor(gguf);  // ne [in, out]: row-major (out, in)
    if (pytorch) {
      put(name, {t.ne[0], t.ne[1]}, transpose(floats_of(t.data), t.ne[1], t.ne[0]));
    } else {
      put(name, {t.ne[1], t.ne[0]}, floats_of(t.data));
    }
  };
  mat("emb.weight", "token_embd.weight");
  put("blocks.0.ln0.weight", {D}, vec("token_embd_norm.weight"));
  put("blocks.0.ln0.bias", {D}, vec("token_embd_norm.bias"));
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    const std::string p = "blk." + std::to_string(i) + ".";
    put(b + "ln1.weight", {D}, vec(p + "attn_norm.weight"));
    put(b + "ln1.bias", {D}, vec(p + "attn_norm.bias"));
    put(b + "ln2.weight", {D}, vec(p + "attn_norm_2.weight"));
    put(b + "ln2.bias", {D}, vec(p + "attn_norm_2.bias"));
    const auto lerp = vec(p + "time_mix_lerp_fused.weight");
    const char* xs[] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};
    for (size_t j = 0; j < 6; ++j) {
      put(b + "att." + xs[j], {1, 1, D},
          std::vector<float>(lerp.begin() + static_cast<ptrdiff_t>(j * D),
                             lerp.begin() + static_cast<ptrdiff_t>((j + 1) * D)));
    }
    for (std::string v : {"w", "a", "v", "g"}) {
      if (v == "v" && i == 0) continue;  // layer 0 has no value-residual LoRA
      if (v != "g") put(b + "att." + v + "0", {1, 1, D}, vec(p + "time_mix_" + v + "0.weight"));
      lora(b + "att." + v + "1", p + "time_mix_" + v + "1.weight");
      lora(b + "att." + v + "2", p + "time_mix_" + v + "2.weight");
    }
    put(b + "att.k_k", {1, 1, D}, vec(p + "time_mix_k_k.weight"));
    put(b + "att.k_a", {1, 1, D}, vec(p + "time_mix_k_a.weight"));
    put(b + "att.r_k", {D / 64, 64}, vec(p + "time_mix_r_k.weight"));
    for (std::string m : {"receptance", "key", "value", "output"}) {
      mat(b + "att." + m + ".weight", p + "time_mix_" + m + ".weight");
    }
    put(b + "att.ln_x.weight", {D}, vec(p + "time_mix_ln.weight"));
    put(b + "att.ln_x.bias", {D}, vec(p + "time_mix_ln.bias"));
    put(b + "ffn.x_k", {1, 1, D}, vec(p + "channel_mix_lerp_k.weight"));
    mat(b + "ffn.key.weight", p + "channel_mix_key.weight");
    mat(b + "ffn.value.weight", p + "channel_mix_value.weight");
  }
  put("ln_out.weight", {D}, vec("output_norm.weight"));
  put("ln_out.bias", {D}, vec("output_norm.bias"));
  mat("head.weight", "output.weight");
  return out;
}

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
void expect_same_tensors(const Rwkv7Plan& plan, GgmlType file_type, const GgufFile& want,
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
  expect_same_tensors(plan, GgmlType::F32, *want);
}

TEST(ConvertSafetensors, PytorchLayoutAsF16MatchesF16Fixture) {
  RWKVD_FIXTURE(f32, kF32);
  RWKVD_FIXTURE(f16, kF16);
  const auto st = blinkdl_from_gguf(*GgufFile::open(f32.string()), true, SourceDtype::F32);
  std::unique_ptr<SourceModel> keep;
  expect_same_tensors(plan_st("pytorch-f32b.st", st, {}, &keep), GgmlType::F16,
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
    if (tensor_type(t, GgmlType::F16) == GgmlType::F32) kept_f32.insert(t.name);
  }
  expect_same_tensors(plan, GgmlType::F16, *want, kept_f32);
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
