// Whole synthetic models: they load with every validation, are a pure function of the seed,
// have llama.cpp's exact header layout, and run hundreds of tokens with healthy logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_builder.h"
#include "tools/synth/synth.h"

namespace rwkvd::tools::synth {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

SynthConfig small(uint64_t seed, FileType type = FileType::kF32) {
  SynthConfig c;
  c.layers = 2;
  c.embd = 128;
  c.vocab = 300;
  c.seed = seed;
  c.type = type;
  return c;
}

class SynthModel : public ::testing::Test {
 protected:
  test::TempDir dir_;
};

TEST_F(SynthModel, SmallModelLoadsWithEveryCheck) {
  const auto path = dir_ / "small.gguf";
  uint64_t last_done = 0, total = 0;
  synthesize(small(7), path.string(), [&](uint64_t done, uint64_t t, std::string_view) {
    EXPECT_GE(done, last_done);
    last_done = done;
    total = t;
  });
  EXPECT_EQ(last_done, total);
  EXPECT_EQ(std::filesystem::file_size(path), total);
  auto m = engine::Rwkv7Model::load(path.string());
  const auto& hp = m->hparams();
  EXPECT_EQ(hp.n_layer, 2u);
  EXPECT_EQ(hp.n_embd, 128u);
  EXPECT_EQ(hp.n_head, 2u);
  EXPECT_EQ(hp.n_ffn, 512u);
  EXPECT_EQ(hp.n_vocab, 300u);
  EXPECT_EQ(hp.rank_g, 32u);
  const auto& f = m->file();
  EXPECT_EQ(f.get_string("general.architecture"), "rwkv7");
  EXPECT_EQ(f.get_u32("general.file_type"), 0u);
  EXPECT_EQ(f.get_u32("rwkv7.context_length"), 1048576u);
  EXPECT_EQ(f.get_u32("rwkv7.attention.head_count"), 0u);
  EXPECT_FLOAT_EQ(f.get_f32("rwkv7.attention.layer_norm_epsilon"), 1e-5f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "rwkv");
  const auto& tokens = f.get_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.strings[0], "<s>");
  EXPECT_EQ(tokens.strings[1], "\\x00");
  EXPECT_EQ(f.get_array("tokenizer.ggml.token_type").elem_type, engine::GgufValueType::I32);
  EXPECT_FALSE(f.has("tokenizer.chat_template"));  // not the world vocab
  // Layer 0's unused value LoRA copies the iclr one, as the converter writes it.
  const auto& l0 = m->layers()[0];
  ASSERT_EQ(l0.v1->n_bytes, l0.a1->n_bytes);
  EXPECT_EQ(std::memcmp(l0.v1->data.data(), l0.a1->data.data(), l0.a1->n_bytes), 0);
}

// The generated vocab is a working tokenizer: text round-trips and common pairs merge.
TEST_F(SynthModel, GeneratedVocabTokenizes) {
  const auto path = dir_ / "tok.gguf";
  synthesize(small(7), path.string());
  auto f = engine::GgufFile::open(path.string());
  auto tok = engine::WorldTokenizer::from_gguf(*f);
  ASSERT_EQ(tok->vocab_size(), 300u);
  const std::string text = "the rain in spain\nstays mainly\x01\xff";
  const auto ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [](int32_t id) { return id > 256; }));
}

TEST_F(SynthModel, SameSeedSameBytes) {
  synthesize(small(7), (dir_ / "a.gguf").string());
  synthesize(small(7), (dir_ / "b.gguf").string());
  synthesize(small(8), (dir_ / "c.gguf").string());
  const std::string a = slurp(dir_ / "a.gguf");
  EXPECT_EQ(a, slurp(dir_ / "b.gguf"));
  const std::string c = slurp(dir_ / "c.gguf");
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST_F(SynthModel, F16UsesTheConverterPolicyAndLoads) {
  const auto path = dir_ / "f16.gguf";
  synthesize(small(7, FileType::kF16), path.string());
  auto m = engine::Rwkv7Model::load(path.string());
  EXPECT_EQ(m->file().get_u32("general.file_type"), 1u);
  EXPECT_EQ(m->head->type, engine::GgmlType::F16);
  EXPECT_EQ(m->layers()[1].w1->type, engine::GgmlType::F32);
  EXPECT_EQ(m->layers()[1].a1->type, engine::GgmlType::F16);
  EXPECT_EQ(m->layers()[1].k_k->type, engine::GgmlType::F32);
}

// With the same shape, name and vocab, the header (metadata and tensor table) is byte for byte
// the one of synthetic-A, which llama.cpp loaded to make the fixtures.
TEST_F(SynthModel, HeaderIsLlamaCppsLayout) {
  RWKVD_FIXTURE(vocab, "tokenizer/rwkv_vocab_v20230424.txt");
  RWKVD_FIXTURE(ref, "rwkv7/synthetic-A.f32.gguf");
  SynthConfig c;
  c.layers = 3;
  c.embd = 256;
  c.ffn = 1024;
  c.vocab = 1024;
  c.seed = 1234;
  c.name = "synthetic-rwkv7-A";
  c.vocab_file = vocab.string();
  const auto path = dir_ / "a.gguf";
  synthesize(c, path.string());
  const auto mine = engine::GgufFile::open(path.string());
  const auto theirs = engine::GgufFile::open(ref.string());
  ASSERT_EQ(mine->data_offset(), theirs->data_offset());
  ASSERT_EQ(mine->file_size(), theirs->file_size());
  const auto a = mine->mapping().bytes().first(mine->data_offset());
  const auto b = theirs->mapping().bytes().first(theirs->data_offset());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  EXPECT_EQ(mine->get_string("tokenizer.chat_template"), "rwkv-world");
  EXPECT_EQ(mine->get_u32("tokenizer.ggml.eot_token_id"), 261u);
}

// Random weights scaled per tensor: 400 tokens later nothing is inf/NaN and the logits still
// have a spread like a trained model's (std of a few units), at every position.
TEST_F(SynthModel, RunsHundredsOfTokensWithHealthyLogits) {
  const auto path = dir_ / "run.gguf";
  synthesize(small(11), path.string());
  engine::BackendOptions o;
  o.n_slots = 1;
  auto backend = engine::make_cpu_backend(engine::Rwkv7Model::load(path.string()), o);
  std::vector<int32_t> toks;
  for (int i = 0; i < 400; ++i) toks.push_back(1 + (i * 37 + i / 7) % 299);
  const engine::SequenceInput in{0, toks, engine::OutputMode::kAllLogits};
  const auto out = backend->run({&in, 1})[0];
  ASSERT_EQ(out.data.size(), toks.size() * 300);
  for (size_t p = 0; p < toks.size(); ++p) {
    double sum = 0, sq = 0;
    for (size_t v = 0; v < 300; ++v) {
      const double x = out.data[p * 300 + v];
      ASSERT_TRUE(std::isfinite(x)) << "position " << p;
      sum += x;
      sq += x * x;
    }
    const double stddev = std::sqrt(sq / 300 - (sum / 300) * (sum / 300));
    ASSERT_GT(stddev, 1.0) << "position " << p;
    ASSERT_LT(stddev, 5.0) << "position " << p;
  }
}

std::vector<float> all_logits(const std::filesystem::path& model, std::span<const int32_t> toks) {
  engine::BackendOptions o;
  o.n_slots = 1;
  auto backend = engine::make_cpu_backend(engine::Rwkv7Model::load(model.string()), o);
  const engine::SequenceInput in{0, toks, engine::OutputMode::kAllLogits};
  return backend->run({&in, 1})[0].data;
}

double pearson(std::span<const float> a, std::span<const float> b) {
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= static_cast<double>(a.size());
  mb /= static_cast<double>(b.size());
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// Quantized files hold the same random weights as the F32 one of the same seed, rounded: they
// load, get llama.cpp's types, and their logits track the F32 logits at every position.
TEST_F(SynthModel, QuantizedTypesLoadAndTrackF32) {
  SynthConfig c = small(3);
  c.layers = 1;
  c.embd = 256;  // k-quants need rows of 256
  synthesize(c, (dir_ / "f32.gguf").string());
  std::vector<int32_t> toks;
  for (int i = 0; i < 48; ++i) toks.push_back(1 + (i * 53) % 299);
  const auto ref = all_logits(dir_ / "f32.gguf", toks);
  struct Case {
    FileType type;
    engine::GgmlType matrix, head;
    double min_corr;
  };
  for (const Case& k :
       {Case{FileType::kQ8_0, engine::GgmlType::Q8_0, engine::GgmlType::Q8_0, 0.999},
        Case{FileType::kQ6_K, engine::GgmlType::Q6_K, engine::GgmlType::Q6_K, 0.995},
        Case{FileType::kQ5_K_M, engine::GgmlType::Q5_K, engine::GgmlType::Q6_K, 0.99},
        Case{FileType::kQ4_K_M, engine::GgmlType::Q4_K, engine::GgmlType::Q6_K, 0.97},
        Case{FileType::kQ4_0, engine::GgmlType::Q4_0, engine::GgmlType::Q6_K, 0.97}}) {
    c.type = k.type;
    const auto path = dir_ / (std::string(file_type_name(k.type)) + ".gguf");
    synthesize(c, path.string());
    auto m = engine::Rwkv7Model::load(path.string());
    EXPECT_EQ(m->file().get_u32("general.file_type"), llama_ftype(k.type));
    EXPECT_EQ(m->file().get_u32("general.quantization_version"), 2u);
    EXPECT_EQ(m->layers()[0].key->type, k.matrix) << file_type_name(k.type);
    EXPECT_EQ(m->layers()[0].ffn_value->type, k.matrix) << file_type_name(k.type);
    EXPECT_EQ(m->token_embd->type, k.matrix) << file_type_name(k.type);
    EXPECT_EQ(m->head->type, k.head) << file_type_name(k.type);
    EXPECT_EQ(m->layers()[0].w1->type, engine::GgmlType::F32);
    const auto got = all_logits(path, toks);
    ASSERT_EQ(got.size(), ref.size());
    double worst = 1.0;
    for (size_t p = 0; p < toks.size(); ++p) {
      worst = std::min(worst, pearson(std::span(got).subspan(p * 300, 300),
                                      std::span(ref).subspan(p * 300, 300)));
    }
    std::printf("%s: worst per-position correlation with f32 %.5f\n",
                std::string(file_type_name(k.type)).c_str(), worst);
    EXPECT_GT(worst, k.min_corr) << file_type_name(k.type);
  }
  // Threads split the quantisation; the bytes must not depend on it.
  c.type = FileType::kQ4_K_M;
  synthesize(c, (dir_ / "again.gguf").string());
  EXPECT_EQ(slurp(dir_ / "again.gguf"), slurp(dir_ / "q4_k_m.gguf"));
}

TEST_F(SynthModel, UnwritableOutputIsAnError) {
  EXPECT_THROW(synthesize(small(1), (dir_ / "missing" / "x.gguf").string()), engine::EngineError);
}

}  // namespace
}  // namespace rwkvd::tools::synth
