// Rwkv7Model::from_gguf on files that are valid GGUF but not a valid RWKV-7: each must be refused
// with an EngineError naming the file, the key or tensor, and what was expected.
#include <gtest/gtest.h>

#include <string>

#include "engine/model.h"
#include "tests/support/engine_error.h"
#include "tests/support/gguf_builder.h"

namespace rwkvd::engine {
namespace {

using test::GgufBuilder;
using test::message_has;
namespace enc = test::enc;
namespace vt = test::vt;

struct Shape {
  int64_t layers = 2, D = 128, head = 64, F = 256, V = 40;
  int64_t rw = 32, ra = 32, rv = 16, rg = 64;
};

// A complete llama.cpp-layout RWKV-7 with all-F32 tensors (contents irrelevant here).
GgufBuilder rwkv7(const Shape& s = {}) {
  GgufBuilder b;
  b.add_string("general.architecture", "rwkv7");
  b.add_u32("rwkv7.block_count", static_cast<uint32_t>(s.layers));
  b.add_u32("rwkv7.embedding_length", static_cast<uint32_t>(s.D));
  b.add_u32("rwkv7.feed_forward_length", static_cast<uint32_t>(s.F));
  b.add_f32("rwkv7.attention.layer_norm_epsilon", 1e-5f);
  b.add_u32("rwkv7.wkv.head_size", static_cast<uint32_t>(s.head));
  b.add_u32("rwkv7.attention.decay_lora_rank", static_cast<uint32_t>(s.rw));
  b.add_u32("rwkv7.attention.iclr_lora_rank", static_cast<uint32_t>(s.ra));
  b.add_u32("rwkv7.attention.value_residual_mix_lora_rank", static_cast<uint32_t>(s.rv));
  b.add_u32("rwkv7.attention.gate_lora_rank", static_cast<uint32_t>(s.rg));
  b.add_u32("rwkv7.attention.head_count", 0);
  b.add_string("tokenizer.ggml.model", "rwkv");
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < s.V; ++i) tokens.push_back("t" + std::to_string(i));
  b.add_kv("tokenizer.ggml.tokens", vt::ARRAY, enc::str_array(tokens));
  b.add_kv("tokenizer.ggml.token_type", vt::ARRAY,
           enc::i32_array(std::vector<int32_t>(static_cast<size_t>(s.V), 1)));
  const int64_t D = s.D;
  b.add_tensor("token_embd.weight", {D, s.V});
  for (const char* n : {"token_embd_norm.weight", "token_embd_norm.bias"}) b.add_tensor(n, {D});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t rv = l == 0 ? s.ra : s.rv;  // layer 0 holds copies of a1/a2
    for (const char* n :
         {"attn_norm.weight", "attn_norm.bias", "attn_norm_2.weight", "attn_norm_2.bias",
          "time_mix_w0.weight", "time_mix_a0.weight", "time_mix_v0.weight", "time_mix_k_k.weight",
          "time_mix_k_a.weight", "time_mix_r_k.weight", "time_mix_ln.weight", "time_mix_ln.bias",
          "channel_mix_lerp_k.weight"}) {
      b.add_tensor(p + n, {D});
    }
    b.add_tensor(p + "time_mix_lerp_fused.weight", {D, 1, 1, 6});
    b.add_tensor(p + "time_mix_w1.weight", {D, s.rw});
    b.add_tensor(p + "time_mix_w2.weight", {s.rw, D});
    b.add_tensor(p + "time_mix_a1.weight", {D, s.ra});
    b.add_tensor(p + "time_mix_a2.weight", {s.ra, D});
    b.add_tensor(p + "time_mix_v1.weight", {D, rv});
    b.add_tensor(p + "time_mix_v2.weight", {rv, D});
    b.add_tensor(p + "time_mix_g1.weight", {D, s.rg});
    b.add_tensor(p + "time_mix_g2.weight", {s.rg, D});
    for (const char* n : {"time_mix_receptance.weight", "time_mix_key.weight",
                          "time_mix_value.weight", "time_mix_output.weight"}) {
      b.add_tensor(p + n, {D, D});
    }
    b.add_tensor(p + "channel_mix_key.weight", {D, s.F});
    b.add_tensor(p + "channel_mix_value.weight", {s.F, D});
  }
  for (const char* n : {"output_norm.weight", "output_norm.bias"}) b.add_tensor(n, {D});
  b.add_tensor("output.weight", {D, s.V});
  return b;
}

class ModelValidation : public ::testing::Test {
 protected:
  std::string load_error(const GgufBuilder& b) {
    b.write(path());
    return test::engine_error_of([&] { Rwkv7Model::load(file()); });
  }
  std::filesystem::path path() const { return dir_ / "model.gguf"; }
  std::string file() const { return path().string(); }
  test::TempDir dir_;
};

TEST_F(ModelValidation, ValidModelLoads) {
  rwkv7().write(path());
  auto m = Rwkv7Model::load(file());
  const Rwkv7Hparams& hp = m->hparams();
  EXPECT_EQ(hp.n_layer, 2u);
  EXPECT_EQ(hp.n_embd, 128u);
  EXPECT_EQ(hp.n_head, 2u);
  EXPECT_EQ(hp.n_vocab, 40u);
  EXPECT_EQ(hp.rank_v, 16u);
  EXPECT_EQ(m->layers()[0].v1->ne[1], 32);  // layer 0's v1 has the iclr rank
  EXPECT_EQ(m->tensors_in_forward_order().size(), 3u + 2 * 28 + 3);
}

TEST_F(ModelValidation, FfnLerpMayBe3D) {
  GgufBuilder b = rwkv7();
  b.tensor("blk.1.channel_mix_lerp_k.weight").ne = {128, 1, 1};  // llama.cpp declares {D, 1, 1}
  b.write(path());
  EXPECT_NO_THROW(Rwkv7Model::load(file()));
}

TEST_F(ModelValidation, MissingTensor) {
  for (const char* name : {"token_embd.weight", "output.weight", "blk.1.time_mix_g2.weight",
                           "blk.0.time_mix_lerp_fused.weight", "blk.1.channel_mix_value.weight"}) {
    GgufBuilder b = rwkv7();
    b.remove_tensor(name);
    EXPECT_TRUE(message_has(load_error(b), {file(), "missing tensor '" + std::string(name) + "'"}));
  }
}

TEST_F(ModelValidation, MissingOrWrongKey) {
  GgufBuilder b = rwkv7();
  std::erase_if(b.kv, [](const auto& k) { return k.key == "rwkv7.wkv.head_size"; });
  EXPECT_TRUE(message_has(load_error(b), {file(), "'rwkv7.wkv.head_size'", "missing"}));
  b = rwkv7();
  b.set_kv("rwkv7.embedding_length", vt::STRING, enc::str("128"));
  EXPECT_TRUE(message_has(
      load_error(b), {file(), "'rwkv7.embedding_length'", "must be an integer, found string"}));
  b = rwkv7();
  b.key("rwkv7.attention.layer_norm_epsilon").value = enc::f32(2.0f);
  EXPECT_TRUE(message_has(load_error(b), {file(), "layer_norm_epsilon", "not in (0, 1)"}));
}

TEST_F(ModelValidation, WrongArchitecture) {
  GgufBuilder b = rwkv7();
  b.key("general.architecture").value = enc::str("rwkv6");
  EXPECT_TRUE(
      message_has(load_error(b), {file(), "'general.architecture' = 'rwkv6'", "expected 'rwkv7'"}));
  std::erase_if(b.kv, [](const auto& k) { return k.key == "general.architecture"; });
  EXPECT_TRUE(message_has(load_error(b), {file(), "'general.architecture'", "missing"}));
}

TEST_F(ModelValidation, HeadSizeTimesHeadsIsNotEmbd) {
  GgufBuilder b = rwkv7();
  b.key("rwkv7.wkv.head_size").value = enc::u32(48);  // 128 is not 48 x heads
  EXPECT_TRUE(message_has(load_error(b),
                          {file(), "embedding_length 128", "not a multiple of head_size 48"}));
  b = rwkv7();
  b.key("rwkv7.attention.head_count").value = enc::u32(4);  // 4 x 64 != 128
  EXPECT_TRUE(message_has(load_error(b), {file(), "'rwkv7.attention.head_count' = 4", "gives 2"}));
}

TEST_F(ModelValidation, ShapeDisagreesWithMetadata) {
  GgufBuilder b = rwkv7();
  b.key("rwkv7.attention.decay_lora_rank").value = enc::u32(64);  // tensors have rank 32
  EXPECT_TRUE(message_has(load_error(b), {file(), "tensor 'blk.0.time_mix_w1.weight'",
                                          "shape [128, 32], expected [128, 64]"}));
  b = rwkv7();
  b.tensor("blk.1.time_mix_g2.weight").ne = {32, 128};  // gate rank 64
  EXPECT_TRUE(message_has(load_error(b), {file(), "tensor 'blk.1.time_mix_g2.weight'",
                                          "shape [32, 128], expected [64, 128]"}));
  b = rwkv7();
  b.tensor("blk.1.time_mix_v1.weight").ne = {128, 32};  // layers >= 1 use the value rank
  EXPECT_TRUE(
      message_has(load_error(b), {file(), "'blk.1.time_mix_v1.weight'", "expected [128, 16]"}));
  b = rwkv7();
  b.key("rwkv7.feed_forward_length").value = enc::u32(512);
  EXPECT_TRUE(message_has(load_error(b),
                          {file(), "'blk.0.channel_mix_key.weight'", "expected [128, 512]"}));
  b = rwkv7();
  b.tensor("blk.0.time_mix_k_k.weight").ne = {64, 2};
  EXPECT_TRUE(
      message_has(load_error(b), {file(), "'blk.0.time_mix_k_k.weight'", "expected 128 elements"}));
  b = rwkv7();
  b.tensor("output.weight").ne = {128, 41};
  EXPECT_TRUE(message_has(load_error(b), {file(), "'output.weight'", "expected [128, 40]"}));
  b = rwkv7();
  b.tensor("token_embd.weight").ne = {64, 80};
  EXPECT_TRUE(
      message_has(load_error(b), {file(), "'token_embd.weight'", "expected [128, n_vocab]"}));
}

TEST_F(ModelValidation, LerpFusedNotSixSlices) {
  for (std::vector<int64_t> ne : {std::vector<int64_t>{128, 1, 1, 5}, {128, 1, 1, 7}, {64, 12}}) {
    GgufBuilder b = rwkv7();
    b.tensor("blk.1.time_mix_lerp_fused.weight").ne = ne;
    EXPECT_TRUE(message_has(
        load_error(b), {file(), "'blk.1.time_mix_lerp_fused.weight'", "expected 6 slices of 128"}));
  }
}

TEST_F(ModelValidation, LayerCountAbsurd) {
  GgufBuilder b = rwkv7();
  for (uint32_t n : {0u, 1025u, 0xffffffffu}) {
    b.key("rwkv7.block_count").value = enc::u32(n);
    EXPECT_TRUE(message_has(load_error(b), {file(), "'rwkv7.block_count' = " + std::to_string(n),
                                            "out of range 1..1024"}));
  }
  b.set_kv("rwkv7.block_count", vt::U64, enc::u64(uint64_t{1} << 40));
  EXPECT_TRUE(message_has(load_error(b), {file(), "'rwkv7.block_count'", "does not fit"}));
  b.set_kv("rwkv7.block_count", vt::U32, enc::u32(3));  // only 2 present
  EXPECT_TRUE(message_has(load_error(b), {file(), "missing tensor 'blk.2."}));
}

TEST_F(ModelValidation, TokenizerArrays) {
  GgufBuilder b = rwkv7();
  b.key("tokenizer.ggml.tokens").value = enc::i32_array(std::vector<int32_t>(40, 1));
  EXPECT_TRUE(message_has(load_error(b), {file(), "'tokenizer.ggml.tokens'",
                                          "must be an array of strings, found an array of i32"}));
  b = rwkv7();
  b.set_kv("tokenizer.ggml.tokens", vt::STRING, enc::str("abc"));
  EXPECT_TRUE(message_has(load_error(b), {file(), "'tokenizer.ggml.tokens'", "found string"}));
  b = rwkv7();
  b.key("tokenizer.ggml.tokens").value = enc::str_array({"a", "b"});
  EXPECT_TRUE(
      message_has(load_error(b), {file(), "'tokenizer.ggml.tokens' has 2 entries", "expected 40"}));
  b = rwkv7();
  b.key("tokenizer.ggml.token_type").value = enc::str_array(std::vector<std::string>(40, "1"));
  EXPECT_TRUE(
      message_has(load_error(b), {file(), "'tokenizer.ggml.token_type'", "32-bit integers"}));
}

}  // namespace
}  // namespace rwkvd::engine
