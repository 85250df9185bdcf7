// Quantised output: converting synthetic-A (as a BlinkDL checkpoint) straight to a quantised
// type gives the tensor types llama_model_quantize chose for the fixture, with data exactly
// as engine/quant's quantize() makes it from the F32 weights.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "engine/convert/convert.h"
#include "engine/gguf.h"
#include "engine/quant/quantize.h"
#include "tests/engine/convert_files.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine::convert {
namespace {

using testing::temp_path;

// synthetic-A's vocab: <s> and the first 1023 lines of the world vocab file.
std::string small_world_vocab(const std::filesystem::path& world) {
  std::ifstream in(world);
  std::ofstream out(temp_path("vocab1023.txt"));
  std::string line;
  for (int i = 0; i < 1023 && std::getline(in, line); ++i) out << line << '\n';
  return temp_path("vocab1023.txt").string();
}

// Layer 0's v0/v1/v2 are unused; synthetic-A has random ones, a converter writes copies of
// a0/a1/a2 there (as llama.cpp's does), so those are what to expect.
std::string expected_source(std::string_view name) {
  std::string n(name);
  for (const char* v : {"blk.0.time_mix_v0.", "blk.0.time_mix_v1.", "blk.0.time_mix_v2."}) {
    if (n.rfind(v, 0) == 0) n[15] = 'a';
  }
  return n;
}

class ConvertQuant : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertQuant, MatchesLlamaQuantizeTypes) {
  const std::string variant = GetParam();
  RWKVD_FIXTURE(f32, "rwkv7/synthetic-A.f32.gguf");
  RWKVD_FIXTURE(quantised, "rwkv7/synthetic-A." + variant + ".gguf");
  RWKVD_FIXTURE(world, "tokenizer/rwkv_vocab_v20230424.txt");
  const auto source = GgufFile::open(f32.string());
  const auto st = testing::blinkdl_from_gguf(*source, /*pytorch=*/true, SourceDtype::F32);
  testing::write_file(temp_path("synthetic-A.st"), testing::safetensors_bytes(st.tensors));

  ConvertOptions o;
  o.input = temp_path("synthetic-A.st").string();
  o.output = temp_path("synthetic-A." + variant + ".gguf").string();
  o.type = variant;
  o.vocab = small_world_vocab(world);
  o.name = "synthetic-rwkv7-A";
  convert_to_gguf(o);
  const auto got = GgufFile::open(o.output);
  const auto want = GgufFile::open(quantised.string());

  // The same keys and values; llama.cpp's quantizer moves file_type to the end, so not in order.
  std::map<std::string, std::string> got_kv, want_kv;
  for (const auto& [k, v] : got->metadata())
    got_kv[std::string(k)] = gguf_value_to_string(v, SIZE_MAX);
  for (const auto& [k, v] : want->metadata())
    want_kv[std::string(k)] = gguf_value_to_string(v, SIZE_MAX);
  EXPECT_EQ(got_kv, want_kv);

  ASSERT_EQ(got->tensors().size(), want->tensors().size());
  for (const auto& w : want->tensors()) {
    SCOPED_TRACE(std::string(w.name));
    const auto& g = got->tensor(w.name);
    EXPECT_EQ(g.type, w.type);
    EXPECT_EQ(g.ne, w.ne);
    // Our quantiser's bytes, from the same F32 weights the fixture was quantised from.
    const auto& src = source->tensor(expected_source(w.name));
    std::vector<std::byte> expected(g.data.size());
    quantize(g.type, testing::floats_of(src.data), expected);
    EXPECT_TRUE(std::equal(g.data.begin(), g.data.end(), expected.begin(), expected.end()));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvertQuant,
                         ::testing::Values("q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"));

// Converted to F32, synthetic-A is its fixture: metadata (in order) and every tensor.
TEST(ConvertQuantF32, SyntheticAF32IsTheFixture) {
  RWKVD_FIXTURE(f32, "rwkv7/synthetic-A.f32.gguf");
  RWKVD_FIXTURE(world, "tokenizer/rwkv_vocab_v20230424.txt");
  const auto want = GgufFile::open(f32.string());
  const auto st = testing::blinkdl_from_gguf(*want, true, SourceDtype::F32);
  testing::write_file(temp_path("synthetic-A-32.st"), testing::safetensors_bytes(st.tensors));
  ConvertOptions o;
  o.input = temp_path("synthetic-A-32.st").string();
  o.output = temp_path("synthetic-A.f32.gguf").string();
  o.vocab = small_world_vocab(world);
  o.name = "synthetic-rwkv7-A";
  convert_to_gguf(o);
  const auto got = GgufFile::open(o.output);
  EXPECT_EQ(got->data_offset(), want->data_offset());
  ASSERT_EQ(got->metadata().size(), want->metadata().size());
  for (size_t i = 0; i < got->metadata().size(); ++i) {
    EXPECT_EQ(got->metadata()[i].first, want->metadata()[i].first);
    EXPECT_EQ(gguf_value_to_string(got->metadata()[i].second, SIZE_MAX),
              gguf_value_to_string(want->metadata()[i].second, SIZE_MAX));
  }
  ASSERT_EQ(got->tensors().size(), want->tensors().size());
  for (size_t i = 0; i < got->tensors().size(); ++i) {
    const auto& g = got->tensors()[i];
    SCOPED_TRACE(std::string(g.name));
    EXPECT_EQ(g.name, want->tensors()[i].name);
    EXPECT_EQ(g.offset, want->tensors()[i].offset);
    const auto& w = want->tensor(expected_source(g.name));
    EXPECT_TRUE(std::equal(g.data.begin(), g.data.end(), w.data.begin(), w.data.end()));
  }
}

}  // namespace
}  // namespace rwkvd::engine::convert
