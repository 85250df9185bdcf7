// The per-tensor type policy against the types llama.cpp chose for every synthetic-A variant
// (manifest.json's tensor_types, and the files themselves), plus the fallbacks for shapes the
// fixtures do not have.
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/quant/type_policy.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine {
namespace {

GgmlType type_of(QuantFtype f, std::string_view name, std::vector<int64_t> ne) {
  return rwkv7_tensor_type(f, name, ne);
}

TEST(TypePolicy, MatchesLlamaCppOnEverySyntheticAVariant) {
  RWKVD_FIXTURE(manifest_path, "rwkv7/manifest.json");
  RWKVD_FIXTURE(f32_path, "rwkv7/synthetic-A.f32.gguf");
  const auto manifest = nlohmann::json::parse(test::read_text_file(manifest_path));
  const auto source = GgufFile::open(f32_path.string());
  const std::array<std::pair<const char*, QuantFtype>, 7> variants{{
      {"f32", QuantFtype::F32},
      {"f16", QuantFtype::F16},
      {"q8_0", QuantFtype::Q8_0},
      {"q4_0", QuantFtype::Q4_0},
      {"q4_k_m", QuantFtype::Q4_K_M},
      {"q5_k_m", QuantFtype::Q5_K_M},
      {"q6_k", QuantFtype::Q6_K},
  }};
  for (const auto& [variant, ftype] : variants) {
    const std::string file = std::string("synthetic-A.") + variant + ".gguf";
    const nlohmann::json* entry = nullptr;
    for (const auto& f : manifest["files"]) {
      if (f["file"] == file) entry = &f;
    }
    ASSERT_NE(entry, nullptr) << file << " not in manifest.json";
    RWKVD_FIXTURE(path, "rwkv7/" + file);
    const auto quantized = GgufFile::open(path.string());
    const auto& types = (*entry)["tensor_types"];
    EXPECT_EQ(types.size(), source->tensors().size()) << file;
    for (const auto& [name, type_name] : types.items()) {
      const auto want = parse_ggml_type(type_name.get<std::string>());
      ASSERT_TRUE(want.has_value()) << type_name;
      const GgufTensor& t = source->tensor(name);
      EXPECT_EQ(rwkv7_tensor_type(ftype, t), *want) << file << " " << name;
      EXPECT_EQ(quantized->tensor(name).type, *want) << file << " " << name;  // manifest == file
    }
    // general.file_type is the llama_ftype, i.e. our enum value.
    EXPECT_EQ(quantized->get_u32("general.file_type"), static_cast<uint32_t>(ftype)) << file;
  }
}

TEST(TypePolicy, FallbacksForShapesTheFixturesLack) {
  const std::string key = "blk.0.time_mix_key.weight";
  // ne[0] = 288: a multiple of 32 but not of 256.
  EXPECT_EQ(type_of(QuantFtype::Q4_K_M, key, {288, 288}), GgmlType::Q5_0);
  EXPECT_EQ(type_of(QuantFtype::Q5_K_M, key, {288, 288}), GgmlType::Q5_1);
  EXPECT_EQ(type_of(QuantFtype::Q6_K, key, {288, 288}), GgmlType::Q8_0);
  EXPECT_EQ(type_of(QuantFtype::Q4_0, key, {288, 288}), GgmlType::Q4_0);
  EXPECT_EQ(type_of(QuantFtype::Q4_K_M, "output.weight", {288, 1000}), GgmlType::Q8_0);
  // Q4_0's output.weight is Q6_K, which does not fit either.
  EXPECT_EQ(type_of(QuantFtype::Q4_0, "output.weight", {288, 1000}), GgmlType::Q8_0);
  // ne[0] = 200: not even a multiple of 32.
  EXPECT_EQ(type_of(QuantFtype::Q4_K_M, key, {200, 64}), GgmlType::F16);
  EXPECT_EQ(type_of(QuantFtype::Q8_0, key, {200, 64}), GgmlType::F16);
  EXPECT_EQ(type_of(QuantFtype::Q4_K_M, "output.weight", {200, 64}), GgmlType::F16);
  EXPECT_EQ(type_of(QuantFtype::F16, "output.weight", {200, 64}), GgmlType::F16);
  // Kept in F32 whatever the ftype: 1-D (trailing 1s do not count), LoRAs, biases.
  for (QuantFtype f : {QuantFtype::F16, QuantFtype::BF16, QuantFtype::Q4_K_M, QuantFtype::Q8_0}) {
    EXPECT_EQ(type_of(f, "blk.1.channel_mix_lerp_k.weight", {256, 1, 1}), GgmlType::F32);
    EXPECT_EQ(type_of(f, "blk.1.time_mix_lerp_fused.weight", {256, 1, 1, 6}), GgmlType::F32);
    EXPECT_EQ(type_of(f, "blk.1.time_mix_a1.weight", {256, 64}), GgmlType::F32);
    EXPECT_EQ(type_of(f, "blk.1.time_mix_decay_w1.weight", {256, 64}), GgmlType::F32);
    EXPECT_EQ(type_of(f, "blk.1.some_matrix.bias", {256, 256}), GgmlType::F32);
  }
  EXPECT_EQ(type_of(QuantFtype::BF16, "output.weight", {256, 1024}), GgmlType::BF16);
  EXPECT_EQ(type_of(QuantFtype::Q5_1, "token_embd.weight", {256, 1024}), GgmlType::Q5_1);
  EXPECT_EQ(type_of(QuantFtype::Q5_1, "output.weight", {256, 1024}), GgmlType::Q6_K);
}

TEST(TypePolicy, Names) {
  EXPECT_EQ(parse_quant_ftype("q4_k_m"), QuantFtype::Q4_K_M);
  EXPECT_EQ(parse_quant_ftype("Q8_0"), QuantFtype::Q8_0);
  EXPECT_EQ(parse_quant_ftype("bf16"), QuantFtype::BF16);
  EXPECT_EQ(parse_quant_ftype("q4_k"), std::nullopt);
  EXPECT_EQ(quant_ftype_name(QuantFtype::Q5_K_M), "Q5_K_M");
  EXPECT_EQ(quant_ftype_base_type(QuantFtype::Q5_K_M), GgmlType::Q5_K);
  EXPECT_EQ(quant_ftype_base_type(QuantFtype::Q6_K), GgmlType::Q6_K);
}

}  // namespace
}  // namespace rwkvd::engine
