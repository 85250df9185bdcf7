// Whole conversions (convert_to_gguf): the written GGUF against the fixture, key by key and
// tensor by tensor, and byte for byte where the input holds the same precision.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "engine/convert/convert.h"
#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "tests/engine/convert_files.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine::convert {
namespace {

using testing::temp_path;

constexpr const char* kBin32 = "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP32.bin";
constexpr const char* kBin16 = "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP16.bin";
constexpr const char* kF32 = "rwkv7/tiny-rwkv7-834K.f32.gguf";
constexpr const char* kF16 = "rwkv7/tiny-rwkv7-834K.f16.gguf";

// Same keys in the same order with the same types and values; same tensors (name, type, ne,
// bytes) in the same order, except the bytes of `skip`.
void expect_same_gguf(const GgufFile& got, const GgufFile& want,
                      const std::set<std::string>& skip = {}) {
  ASSERT_EQ(got.metadata().size(), want.metadata().size());
  for (size_t i = 0; i < got.metadata().size(); ++i) {
    const auto& [gk, gv] = got.metadata()[i];
    const auto& [wk, wv] = want.metadata()[i];
    EXPECT_EQ(gk, wk) << "key " << i;
    EXPECT_EQ(gv.type, wv.type) << wk;
    EXPECT_EQ(gguf_value_to_string(gv, SIZE_MAX), gguf_value_to_string(wv, SIZE_MAX)) << wk;
  }
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (size_t i = 0; i < got.tensors().size(); ++i) {
    const auto& g = got.tensors()[i];
    const auto& w = want.tensors()[i];
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.type, w.type) << w.name;
    EXPECT_EQ(g.ne, w.ne) << w.name;
    if (skip.count(std::string(w.name)) == 0) {
      EXPECT_TRUE(std::equal(g.data.begin(), g.data.end(), w.data.begin(), w.data.end()))
          << w.name << ": bytes differ";
    }
  }
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  return testing::read_file(a) == testing::read_file(b);
}

ConvertSummary convert(const std::filesystem::path& in, const std::string& out,
                       const std::string& type, const std::string& name = "") {
  ConvertOptions o;
  o.input = in.string();
  o.output = temp_path(out).string();
  o.type = type;
  o.name = name;
  return convert_to_gguf(o);
}

TEST(ConvertFile, RwkvCppFp32IsTheFixtureByteForByte) {
  RWKVD_FIXTURE(bin, kBin32);
  RWKVD_FIXTURE(f32, kF32);
  RWKVD_FIXTURE(f16, kF16);
  const auto s = convert(bin, "tiny.f32.gguf", "f32");
  EXPECT_EQ(s.file_type, QuantFtype::F32);
  EXPECT_EQ(s.vocab, "byte");
  expect_same_gguf(*GgufFile::open(temp_path("tiny.f32.gguf").string()),
                   *GgufFile::open(f32.string()));
  EXPECT_TRUE(same_file(temp_path("tiny.f32.gguf"), f32));
  convert(bin, "tiny.f16.gguf", "f16");
  expect_same_gguf(*GgufFile::open(temp_path("tiny.f16.gguf").string()),
                   *GgufFile::open(f16.string()));
  EXPECT_TRUE(same_file(temp_path("tiny.f16.gguf"), f16));
}

// "auto" keeps FP16 as F16; only w1/w2 differ (rounded in the FP16 file, F32 in llama.cpp's).
TEST(ConvertFile, RwkvCppFp16AutoIsF16) {
  RWKVD_FIXTURE(bin, kBin16);
  RWKVD_FIXTURE(f16, kF16);
  const auto s = convert(bin, "tiny16.gguf", "auto");
  EXPECT_EQ(s.file_type, QuantFtype::F16);
  const auto want = GgufFile::open(f16.string());
  std::set<std::string> decay;
  for (const auto& t : want->tensors()) {
    const std::string n(t.name);
    if (n.find("time_mix_w1") != n.npos || n.find("time_mix_w2") != n.npos) decay.insert(n);
  }
  expect_same_gguf(*GgufFile::open(temp_path("tiny16.gguf").string()), *want, decay);
}

// A .pth's tensors (PyTorch names and layout, all F32) through SafeTensors give the fixture.
TEST(ConvertFile, SafetensorsInPytorchLayoutIsTheFixture) {
  RWKVD_FIXTURE(bin, kBin32);
  RWKVD_FIXTURE(f32, kF32);
  // rwkv.cpp's tensors renamed and reshaped to BlinkDL's: un-fuse the lerps, un-transpose LoRAs.
  const auto tiny = open_checkpoint(bin.string());
  testing::OwnedTensors st;
  for (const auto& t : tiny.tensors) {
    const auto dot = t.name.rfind('.');
    const std::string leaf = t.name.substr(dot + 1);
    if (leaf == "x_rwkvag") {
      const char* xs[] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};
      const size_t part = t.data.size() / 6;
      for (size_t j = 0; j < 6; ++j) {
        st.add(t.name.substr(0, dot + 1) + xs[j], {1, 1, t.shape[2]}, t.dtype,
               {t.data.begin() + static_cast<ptrdiff_t>(j * part),
                t.data.begin() + static_cast<ptrdiff_t>((j + 1) * part)});
      }
    } else if (leaf.size() == 2 && std::string("wavg").find(leaf[0]) != std::string::npos &&
               (leaf[1] == '1' || leaf[1] == '2')) {
      const auto rows = static_cast<size_t>(t.shape[0]), cols = static_cast<size_t>(t.shape[1]);
      std::vector<std::byte> tr(t.data.size());
      for (size_t r = 0; r < rows; ++r) {
        for (size_t c = 0; c < cols; ++c) {
          std::memcpy(&tr[(c * rows + r) * 4], &t.data[(r * cols + c) * 4], 4);
        }
      }
      st.add(t.name, {t.shape[1], t.shape[0]}, t.dtype, std::move(tr));
    } else {
      st.add(t.name, t.shape, t.dtype, {t.data.begin(), t.data.end()});
    }
  }
  testing::write_file(temp_path("tiny.st"), testing::safetensors_bytes(st.tensors));
  const auto s = convert(temp_path("tiny.st"), "from-st.gguf", "auto", "tiny-rwkv-7v0-834K");
  EXPECT_EQ(s.format, "safetensors");
  EXPECT_TRUE(same_file(temp_path("from-st.gguf"), f32));
}

// A world model: 65536 tokens from rwkv_vocab_v20230424.txt; llama.cpp's tokenizer metadata.
TEST(ConvertFile, WorldVocab) {
  RWKVD_FIXTURE(vocab, "tokenizer/rwkv_vocab_v20230424.txt");
  const auto m = testing::synthetic_blinkdl(64, 2, 65536, 128, 64, 32);
  testing::write_file(temp_path("world.st"), testing::safetensors_bytes(m.tensors));
  ConvertOptions o;
  o.input = temp_path("world.st").string();
  o.output = temp_path("world.gguf").string();
  o.vocab = vocab.string();
  const auto s = convert_to_gguf(o);
  EXPECT_EQ(s.file_type, QuantFtype::F32);  // an all-F32 checkpoint stays F32
  const auto g = GgufFile::open(o.output);
  EXPECT_EQ(g->get_string("general.name"), "world");
  EXPECT_EQ(g->get_u32("tokenizer.ggml.eot_token_id"), 261u);
  EXPECT_EQ(g->get_string("tokenizer.chat_template"), "rwkv-world");
  const auto& tokens = g->get_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.count, 65536u);
  EXPECT_EQ(tokens.strings[0], "<s>");
  EXPECT_EQ(tokens.strings[1], "\\x00");
  EXPECT_EQ(tokens.strings[11], "\\n");
  EXPECT_EQ(tokens.strings[261], "\\n\\n");
  EXPECT_EQ(tokens.strings[65535], "[PAD65535]");
  const auto& types = g->get_array("tokenizer.ggml.token_type");
  int32_t t0, t1, tlast;
  std::memcpy(&t0, types.raw.data(), 4);
  std::memcpy(&t1, types.raw.data() + 4, 4);
  std::memcpy(&tlast, types.raw.data() + 4 * 65535, 4);
  EXPECT_EQ(t0, 3);
  EXPECT_EQ(t1, 1);
  EXPECT_EQ(tlast, 5);
  // The escaped tokens read back (by the GGUF vocab reader) as the vocab file's bytes.
  const auto from_gguf = WorldTokenizer::from_gguf(*g);
  const auto from_file = WorldTokenizer::from_vocab_file(vocab.string());
  for (int32_t id = 1; id < static_cast<int32_t>(from_file->vocab_size()); ++id) {
    ASSERT_EQ(from_gguf->token_bytes(id), from_file->token_bytes(id)) << "token " << id;
  }
}

TEST(ConvertFile, FailureLeavesNoOutput) {
  RWKVD_FIXTURE(bin, kBin32);
  auto bytes = testing::read_file(bin);
  bytes.resize(bytes.size() / 2);
  testing::write_file(temp_path("half.bin"), bytes);
  EXPECT_THROW(convert(temp_path("half.bin"), "half.gguf", "f32"), EngineError);
  EXPECT_FALSE(std::filesystem::exists(temp_path("half.gguf")));
  // A 65536-token model needs the world vocab.
  const auto m = testing::synthetic_blinkdl(64, 1, 65536, 128, 64, 32);
  testing::write_file(temp_path("novocab.st"), testing::safetensors_bytes(m.tensors));
  try {
    convert(temp_path("novocab.st"), "novocab.gguf", "f32");
    ADD_FAILURE() << "no error";
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("pass --vocab rwkv_vocab_v20230424.txt"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(temp_path("novocab.gguf")));
}

TEST(ConvertFile, DefaultNames) {
  EXPECT_EQ(default_model_name("/x/tiny-rwkv-7v0-834K-FP32.bin"), "tiny-rwkv-7v0-834K");
  EXPECT_EQ(default_model_name("m_fp16.st"), "m");
  EXPECT_EQ(default_model_name("RWKV-x070-World-0.1B-v2.8-20241210-ctx4096.pth"),
            "RWKV-x070-World-0.1B-v2.8-20241210-ctx4096");
  EXPECT_EQ(default_model_name("-fp16.st"), "-fp16");
}

}  // namespace
}  // namespace rwkvd::engine::convert
