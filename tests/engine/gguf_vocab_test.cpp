// Vocabs from GGUF metadata and from raw bytes: llama.cpp's escaping, token types, and the
// errors for malformed vocabs. The GGUFs are written by the test (no fixtures needed).
#include <gtest/gtest.h>

#include <random>

#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/gguf_vocab.h"
#include "engine/tokenizer.h"
#include "tests/engine/tokenizer_helpers.h"
#include "tests/support/gguf_writer.h"

namespace rwkvd::engine {
namespace {

using test::byte_tokens;
using test::error_of;
std::vector<std::string> escaped(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& t : raw) out.push_back(escape_gguf_token(t));
  return out;
}

class GgufVocab : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("gguf-vocab"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<WorldTokenizer> load(const test::GgufWriter& w) {
    const auto path = dir_ / "vocab.gguf";
    w.write(path);
    return WorldTokenizer::from_gguf(*GgufFile::open(path.string()));
  }
  std::string load_error(const test::GgufWriter& w) {
    return error_of([&] { load(w); });
  }

  std::filesystem::path dir_;
};

// Python's repr(bytes)[2:-1], case by case (what llama.cpp's converter writes).
TEST(GgufTokenEscape, EscapesLikePythonRepr) {
  EXPECT_EQ(escape_gguf_token("abc"), "abc");
  EXPECT_EQ(escape_gguf_token(" hello~"), " hello~");
  EXPECT_EQ(escape_gguf_token(""), "");
  EXPECT_EQ(escape_gguf_token("\\"), "\\\\");
  EXPECT_EQ(escape_gguf_token("\t\n\r"), "\\t\\n\\r");
  EXPECT_EQ(escape_gguf_token(std::string("\x00\x1f\x7f\x80\xff", 5)), "\\x00\\x1f\\x7f\\x80\\xff");
  EXPECT_EQ(escape_gguf_token("'"), "'");        // repr picks double quotes: b"'"
  EXPECT_EQ(escape_gguf_token("\""), "\"");      // b'"'
  EXPECT_EQ(escape_gguf_token("'\""), "\\'\"");  // both: single quotes, ' escaped
  EXPECT_EQ(escape_gguf_token("\xe4\xbd\xa0"), "\\xe4\\xbd\\xa0");  // UTF-8 stays bytes
}

TEST(GgufTokenEscape, UnescapesLlamaCppForms) {
  EXPECT_EQ(unescape_gguf_token("abc"), "abc");
  EXPECT_EQ(unescape_gguf_token(R"(\t\n\r)"), "\t\n\r");
  EXPECT_EQ(unescape_gguf_token(R"(\\\'")"), "\\'\"");
  EXPECT_EQ(unescape_gguf_token(R"(\x00\xe4\xb8\xff)"), std::string("\x00\xE4\xB8\xFF", 4));
  EXPECT_EQ(unescape_gguf_token("é"), "é");  // raw UTF-8 is literal
  EXPECT_EQ(unescape_gguf_token(""), "");
}

TEST(GgufTokenEscape, RejectsWhatLlamaCppWouldMisread) {
  for (const char* bad : {"\\", R"(a\x)", R"(\x4)", R"(\xAB)", R"(\xg0)"}) {
    EXPECT_THROW(unescape_gguf_token(bad), EngineError) << bad;
  }
}

TEST(GgufTokenEscape, UnescapeInvertsEscapeForAnyBytes) {
  std::mt19937 rng(7);
  for (int b = 0; b < 256; ++b) {
    const std::string s(1, static_cast<char>(b));
    ASSERT_EQ(unescape_gguf_token(escape_gguf_token(s)), s) << b;
  }
  for (int round = 0; round < 1000; ++round) {
    std::string s(rng() % 12, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? "'\"\\"[rng() % 3] : rng() & 0xFF);
    ASSERT_EQ(unescape_gguf_token(escape_gguf_token(s)), s);
  }
}

TEST_F(GgufVocab, ByteVocabWithoutTokenTypes) {
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "rwkv");
  w.add_string_array("tokenizer.ggml.tokens", escaped(byte_tokens()));
  const auto tok = load(w);
  EXPECT_EQ(tok->vocab_size(), 256u);
  EXPECT_EQ(tok->encode("\xFF"
                        "a\n"),
            (std::vector<int32_t>{255, 97, 10}));
}

TEST_F(GgufVocab, ControlAndUnusedTokensAreNeverMatched) {
  auto raw = byte_tokens();
  raw.push_back("<s>");  // 256: CONTROL
  raw.push_back("ab");   // 257: UNUSED
  raw.push_back("ab<");  // 258: NORMAL
  std::vector<int32_t> types(raw.size(), 1);
  types[256] = 3;
  types[257] = 5;
  test::GgufWriter w;
  w.add_string_array("tokenizer.ggml.tokens", escaped(raw));
  w.add_i32_array("tokenizer.ggml.token_type", types);
  const auto tok = load(w);
  EXPECT_EQ(tok->encode("<s>"), (std::vector<int32_t>{'<', 's', '>'}));
  EXPECT_EQ(tok->encode("ab<s>"), (std::vector<int32_t>{258, 's', '>'}));
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{'a', 'b', 'c'}));
  EXPECT_EQ(tok->token_bytes(256), "");
  EXPECT_EQ(tok->token_bytes(257), "");
}

TEST_F(GgufVocab, TokensOfTheWrongElementType) {
  test::GgufWriter w;
  w.add_i32_array("tokenizer.ggml.tokens", {1, 2, 3});
  const std::string msg = load_error(w);
  EXPECT_NE(msg.find("tokenizer.ggml.tokens must be an array of strings, found an array of i32"),
            std::string::npos)
      << msg;
}

TEST_F(GgufVocab, MissingAndEmptyVocab) {
  test::GgufWriter none;
  none.add_string("tokenizer.ggml.model", "rwkv");
  EXPECT_NE(load_error(none).find("tokenizer.ggml.tokens"), std::string::npos);
  test::GgufWriter empty;
  empty.add_string_array("tokenizer.ggml.tokens", {});
  EXPECT_NE(load_error(empty).find("empty"), std::string::npos) << load_error(empty);
}

TEST_F(GgufVocab, OtherTokenizerModelsAreRejected) {
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string_array("tokenizer.ggml.tokens", escaped(byte_tokens()));
  EXPECT_NE(load_error(w).find("'gpt2'"), std::string::npos) << load_error(w);
}

TEST_F(GgufVocab, TokenTypeArrayMustMatch) {
  test::GgufWriter count;
  count.add_string_array("tokenizer.ggml.tokens", escaped(byte_tokens()));
  count.add_i32_array("tokenizer.ggml.token_type", {1, 1});
  EXPECT_NE(load_error(count).find("has 2 entries but tokenizer.ggml.tokens has 256"),
            std::string::npos)
      << load_error(count);
  test::GgufWriter type;
  type.add_string_array("tokenizer.ggml.tokens", escaped(byte_tokens()));
  type.add_f32_array("tokenizer.ggml.token_type", std::vector<float>(256, 1.0f));
  EXPECT_NE(load_error(type).find("array of integers, found an array of f32"), std::string::npos)
      << load_error(type);
}

TEST_F(GgufVocab, BadEscapeNamesTheToken) {
  auto tokens = escaped(byte_tokens());
  tokens.push_back(R"(\xE4)");
  test::GgufWriter w;
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  const std::string msg = load_error(w);
  EXPECT_NE(msg.find("tokenizer.ggml.tokens[256]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lowercase hex"), std::string::npos) << msg;
}

TEST(TokenBytes, RejectsDuplicatesAndMissingBytes) {
  auto dup = byte_tokens();
  dup.push_back("ab");
  dup.push_back("ab");
  EXPECT_NE(error_of([&] {
              WorldTokenizer::from_token_bytes(dup);
            }).find("token ids 256 and 257 have the same bytes"),
            std::string::npos);
  auto missing = byte_tokens();
  missing['z'] = "";
  EXPECT_NE(error_of([&] { WorldTokenizer::from_token_bytes(missing); }).find("0x7a"),
            std::string::npos);
  EXPECT_NE(error_of([] { WorldTokenizer::from_token_bytes({}); }).find("empty vocab"),
            std::string::npos);
}

TEST(TokenBytes, LongestMatchFallsBackPastNonTokenPrefixes) {
  auto tokens = byte_tokens();
  tokens.push_back("abcd");  // 256; "abc" and "ab" are not tokens
  tokens.push_back("xy");    // 257
  const auto tok = WorldTokenizer::from_token_bytes(tokens);
  EXPECT_EQ(tok->encode("abcd"), (std::vector<int32_t>{256}));
  EXPECT_EQ(tok->encode("abcx"), (std::vector<int32_t>{'a', 'b', 'c', 'x'}));
  EXPECT_EQ(tok->encode("abcxy"), (std::vector<int32_t>{'a', 'b', 'c', 257}));
  EXPECT_EQ(tok->encode("abcdabc"), (std::vector<int32_t>{256, 'a', 'b', 'c'}));
}

}  // namespace
}  // namespace rwkvd::engine
