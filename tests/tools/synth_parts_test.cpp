// The pieces of `rwkvd synth`: LoRA ranks, presets, the token escaping and vocab reading, the
// per-tensor type choice (checked against files llama.cpp made), and the fp16 encoding.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/quant/dequant.h"
#include "tests/support/fixtures.h"
#include "tools/synth/config.h"
#include "tools/synth/encode.h"
#include "tools/synth/rng.h"
#include "tools/synth/type_choice.h"
#include "tools/synth/vocab.h"

namespace rwkvd::tools::synth {
namespace {

TEST(SynthConfig, LoraRanksFollowTheConverter) {
  auto eq = [](LoraRanks r, uint32_t w, uint32_t a, uint32_t v, uint32_t g) {
    return r.w == w && r.a == a && r.v == v && r.g == g;
  };
  EXPECT_TRUE(eq(default_lora_ranks(768), 64, 64, 32, 128));  // the README's example
  EXPECT_TRUE(eq(default_lora_ranks(256), 32, 32, 32, 64));   // synthetic-A
  EXPECT_TRUE(eq(default_lora_ranks(64), 32, 32, 32, 32));    // max(1, ...) floor
  EXPECT_TRUE(eq(default_lora_ranks(4096), 128, 128, 96, 480));
}

TEST(SynthConfig, PresetsAndTypes) {
  ASSERT_TRUE(find_preset("2.9b"));
  EXPECT_EQ(find_preset("2.9b")->layers, 32u);
  EXPECT_EQ(find_preset("2.9b")->embd, 2560u);
  EXPECT_EQ(find_preset("0.1b")->embd, 768u);
  EXPECT_FALSE(find_preset("3b"));
  EXPECT_EQ(parse_file_type("Q4_K_M"), FileType::kQ4_K_M);
  EXPECT_EQ(llama_ftype(FileType::kQ4_K_M), 15u);
  EXPECT_EQ(llama_ftype(FileType::kQ6_K), 18u);
  EXPECT_FALSE(parse_file_type("q3_k"));
}

TEST(SynthConfig, RefusesWhatTheLoaderWould) {
  SynthConfig c;
  c.layers = 2;
  c.embd = 100;  // not a multiple of the head size 64
  EXPECT_THROW(c.validate(), engine::EngineError);
  c.embd = 128;
  c.vocab = 1;
  EXPECT_THROW(c.validate(), engine::EngineError);
  c.vocab = 300;
  EXPECT_NO_THROW(c.validate());
}

TEST(SynthRng, DeterministicAndRoughlyNormal) {
  const TensorRng a(1, "x"), b(1, "x"), c(2, "x"), d(1, "y");
  EXPECT_EQ(a.bits(5), b.bits(5));
  EXPECT_NE(a.bits(5), c.bits(5));
  EXPECT_NE(a.bits(5), d.bits(5));
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = a.normal(static_cast<uint64_t>(i));
    sum += v;
    sq += v * v;
    ASSERT_LT(std::abs(v), 3.47);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
}

TEST(SynthVocab, GeneratedTokensAreBytesThenUniqueNgrams) {
  const auto t = generated_token_bytes(70000);
  ASSERT_EQ(t.size(), 69999u);
  for (int b = 0; b < 256; ++b)
    ASSERT_EQ(t[static_cast<size_t>(b)], std::string(1, static_cast<char>(b)));
  EXPECT_EQ(t[256], "  ");
  EXPECT_EQ(t[257], " e");
  EXPECT_EQ(std::set<std::string>(t.begin(), t.end()).size(), t.size());
  const Vocab v = make_vocab(300, std::nullopt);
  ASSERT_EQ(v.tokens.size(), 300u);
  EXPECT_EQ(v.tokens[0], "<s>");
  EXPECT_EQ(v.types[0], kTokenControl);
  EXPECT_EQ(v.tokens[1], "\\x00");
  EXPECT_EQ(v.tokens[11], "\\n");
  EXPECT_EQ(v.types[299], kTokenNormal);
  EXPECT_FALSE(v.world);
}

TEST(SynthVocab, WorldVocabMatchesTheConvertersOutput) {
  RWKVD_FIXTURE(vocab, "tokenizer/rwkv_vocab_v20230424.txt");
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.f32.gguf");
  const auto lines = read_world_vocab(vocab.string());
  ASSERT_EQ(lines.size(), 65529u);
  EXPECT_EQ(lines[0], std::string(1, '\0'));
  EXPECT_EQ(lines[260], "\n\n");  // id 261, the EOT
  EXPECT_EQ(lines[65528], std::string(128, ' '));
  // synthetic-A's tokens were written by a converter from the same file.
  auto f = engine::GgufFile::open(model.string());
  const auto& want = f->get_array("tokenizer.ggml.tokens");
  const Vocab v = make_vocab(static_cast<uint32_t>(want.count), vocab.string());
  ASSERT_EQ(v.tokens.size(), want.strings.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) ASSERT_EQ(v.tokens[i], want.strings[i]) << i;
  // Past the end of the file: padding, as the converter does.
  const Vocab big = make_vocab(65536, vocab.string());
  EXPECT_EQ(big.tokens[65530], "[PAD65530]");
  EXPECT_EQ(big.types[65535], kTokenUnused);
  EXPECT_EQ(big.types[65529], kTokenNormal);
}

TEST(SynthVocab, BadVocabFileIsNamed) {
  const auto path = std::filesystem::temp_directory_path() / "rwkvd-bad-vocab.txt";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("1 'a' 1\n2 'bc' 3\n", f);
    std::fclose(f);
  }
  try {
    read_world_vocab(path.string());
    ADD_FAILURE() << "no error";
  } catch (const engine::EngineError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":2"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// The type of every tensor in files llama.cpp made must be what type_choice picks for it.
TEST(SynthTypes, MatchLlamaCppFiles) {
  const std::pair<const char*, FileType> files[] = {{"tiny-rwkv7-834K.f32.gguf", FileType::kF32},
                                                    {"tiny-rwkv7-834K.f16.gguf", FileType::kF16},
                                                    {"synthetic-A.q8_0.gguf", FileType::kQ8_0},
                                                    {"synthetic-A.q4_0.gguf", FileType::kQ4_0},
                                                    {"synthetic-A.q4_k_m.gguf", FileType::kQ4_K_M},
                                                    {"synthetic-A.q5_k_m.gguf", FileType::kQ5_K_M},
                                                    {"synthetic-A.q6_k.gguf", FileType::kQ6_K}};
  for (const auto& [name, ftype] : files) {
    RWKVD_FIXTURE(path, std::string("rwkv7/") + name);
    auto f = engine::GgufFile::open(path.string());
    for (const auto& t : f->tensors()) {
      const std::span<const int64_t> ne(t.ne.data(), t.n_dims);
      EXPECT_EQ(tensor_type(ftype, t.name, ne), t.type) << name << " " << t.name;
    }
  }
}

TEST(SynthTypes, KQuantFallbacksForShortRows) {
  const std::vector<int64_t> ne{128, 128};
  EXPECT_EQ(tensor_type(FileType::kQ4_K_M, "blk.0.time_mix_key.weight", ne),
            engine::GgmlType::Q5_0);
  EXPECT_EQ(tensor_type(FileType::kQ5_K_M, "blk.0.time_mix_key.weight", ne),
            engine::GgmlType::Q5_1);
  EXPECT_EQ(tensor_type(FileType::kQ6_K, "output.weight", ne), engine::GgmlType::Q8_0);
  const std::vector<int64_t> odd{100, 4};
  EXPECT_EQ(tensor_type(FileType::kQ4_0, "blk.0.time_mix_key.weight", odd), engine::GgmlType::F16);
}

TEST(SynthEncode, Fp16RoundsToNearestEven) {
  auto h = [](float f) {
    std::byte b[2];
    encode(engine::GgmlType::F16, &f, b, 1);
    uint16_t v;
    std::memcpy(&v, b, 2);
    return v;
  };
  EXPECT_EQ(h(1.0f), 0x3c00);
  EXPECT_EQ(h(-2.0f), 0xc000);
  EXPECT_EQ(h(65504.0f), 0x7bff);
  EXPECT_EQ(h(65519.0f), 0x7bff);
  EXPECT_EQ(h(65520.0f), 0x7c00);            // rounds to infinity
  EXPECT_EQ(h(1.0f + 1.0f / 2048), 0x3c00);  // halfway: to even
  EXPECT_EQ(h(1.0f + 3.0f / 2048), 0x3c02);  // halfway: to even (up)
  EXPECT_EQ(h(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(h(2.0e-8f), 0x0000);
  EXPECT_EQ(h(6.1035156e-5f), 0x0400);  // smallest normal
  for (float f : {0.1f, -0.333f, 3.14159f, 1e-3f, 1234.5f, 3e-6f}) {
    EXPECT_NEAR(engine::fp16_to_fp32(h(f)), f, std::abs(f) * 1e-3 + 6e-8) << f;
  }
}

}  // namespace
}  // namespace rwkvd::tools::synth
