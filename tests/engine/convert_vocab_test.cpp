// The vocab metadata the converter writes, against llama.cpp's converter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/convert/vocab.h"
#include "engine/error.h"
#include "engine/gguf.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine::convert {
namespace {

TEST(ConvertVocab, ByteVocabMatchesFixture) {
  RWKVD_FIXTURE(path, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const auto g = GgufFile::open(path.string());
  const auto& want = g->get_array("tokenizer.ggml.tokens");
  const auto v = byte_vocab(256);
  ASSERT_EQ(v.tokens.size(), want.strings.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) EXPECT_EQ(v.tokens[i], want.strings[i]) << i;
  EXPECT_EQ(v.types, std::vector<int32_t>(256, kTokenNormal));
  EXPECT_FALSE(v.world);
  EXPECT_THROW(byte_vocab(65536), EngineError);
}

TEST(ConvertVocab, WorldVocabPadsAndMarksControl) {
  const std::vector<std::string> file{"", std::string(1, '\0'), "a\n", "'x"};  // ids 1..3
  const auto v = world_vocab(file, 6, "vocab.txt");
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"<s>", "\\x00", "a\\n", "'x", "[PAD4]", "[PAD5]"}));
  EXPECT_EQ(v.types, (std::vector<int32_t>{3, 1, 1, 1, 5, 5}));
  EXPECT_TRUE(v.world);
  EXPECT_THROW(world_vocab(file, 3, "vocab.txt"), EngineError);  // more tokens than the model
  EXPECT_THROW(world_vocab({"", "a", "", "b"}, 8, "vocab.txt"), EngineError);  // id 2 missing
}

}  // namespace
}  // namespace rwkvd::engine::convert
