// The vocab file reader: Python literal decoding and the errors for malformed lines. Needs no
// fixtures: the inputs are written inline.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/error.h"
#include "engine/tokenizer.h"
#include "engine/vocab_file.h"
#include "tests/engine/tokenizer_helpers.h"
#include "tests/support/gguf_writer.h"

namespace rwkvd::engine {
namespace {

using test::error_of;
TEST(PythonLiteral, StrLiteralsAreUtf8OfCodePoints) {
  EXPECT_EQ(decode_python_literal("'a b'"), "a b");
  EXPECT_EQ(decode_python_literal("\"it's\""), "it's");
  EXPECT_EQ(decode_python_literal(R"('\'\"\\')"), "'\"\\");
  EXPECT_EQ(decode_python_literal(R"('\n\t\r')"), "\n\t\r");
  EXPECT_EQ(decode_python_literal(R"('\x80')"), "\xC2\x80");  // U+0080, not the byte 0x80
  EXPECT_EQ(decode_python_literal(R"('\xff\x00')"), std::string("\xC3\xBF\x00", 3));
  EXPECT_EQ(decode_python_literal(R"('\u2002')"), "\xE2\x80\x82");
  EXPECT_EQ(decode_python_literal(R"('\U0001FAE8')"), "\xF0\x9F\xAB\xA8");
  EXPECT_EQ(decode_python_literal("'中文'"), "中文");  // raw UTF-8 stays as is
}

TEST(PythonLiteral, BytesLiteralsAreBytes) {
  EXPECT_EQ(decode_python_literal(R"(b'\xe4\xb8')"), "\xE4\xB8");
  EXPECT_EQ(decode_python_literal(R"(b'\x80')"), "\x80");
  EXPECT_EQ(decode_python_literal(R"(b"'\\")"), "'\\");
}

TEST(PythonLiteral, RejectsMalformedLiterals) {
  for (const char* bad :
       {"abc", "'abc", "'abc\"", "'", "b'", R"('\q')", R"('\x8')", R"('\xzz')", R"('a\')",
        R"('\ud800')", R"('\U00110000')", R"(b'\u2002')", "b'é'", "'it's'", "'\xE4\xB8'"}) {
    EXPECT_THROW(decode_python_literal(bad), EngineError) << bad;
  }
}

TEST(VocabFile, ParsesLinesAndSplitsAtFirstAndLastSpace) {
  const std::string text =
      "1 ' ' 1\n"
      "2 ' a b ' 5\n"
      "3 b'\\xe4\\xb8' 2\n"
      "5 '\\x80' 2\n";
  const auto tokens = parse_vocab_text(text, "v.txt");
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(tokens[0], "");
  EXPECT_EQ(tokens[1], " ");
  EXPECT_EQ(tokens[2], " a b ");
  EXPECT_EQ(tokens[3], "\xE4\xB8");
  EXPECT_EQ(tokens[4], "");  // a gap: no bytes
  EXPECT_EQ(tokens[5], "\xC2\x80");
}

TEST(VocabFile, AcceptsAMissingFinalNewline) {
  EXPECT_EQ(parse_vocab_text("1 'a' 1\n2 'b' 1", "v.txt").size(), 3u);
}

TEST(VocabFile, MalformedLinesNameFileAndLine) {
  struct Bad {
    const char* line;
    const char* message;
  };
  for (const Bad& b :
       {Bad{"2 'ab' 3", "length field says 3 bytes but the literal is 2"},
        Bad{"2 'ab'", "expected `<id> <literal> <length>`"},
        Bad{"x 'a' 1", "id is not a decimal number"},
        Bad{"2 'a' 1x", "length field is not a decimal number"},
        Bad{"2 'a\\q' 2", "unsupported escape \\q"}, Bad{"1 'b' 1", "id 1 appears twice"},
        Bad{"99999999 'b' 1", "too large"}, Bad{"2 '' 0", "empty token"}}) {
    const std::string text = std::string("1 'a' 1\n") + b.line + "\n";
    const std::string msg = error_of([&] { parse_vocab_text(text, "v.txt"); });
    EXPECT_NE(msg.find("v.txt:2: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.message), std::string::npos) << msg;
  }
}

TEST(VocabFile, EmptyVocabIsAnError) {
  EXPECT_NE(error_of([] { parse_vocab_text("", "v.txt"); }).find("empty vocab"), std::string::npos);
  EXPECT_NE(error_of([] { parse_vocab_text("\n\n", "v.txt"); }).find("empty vocab"),
            std::string::npos);
}

TEST(VocabFile, FromVocabFileReportsPathAndLine) {
  const auto dir = test::make_temp_dir("vocab-file");
  const auto path = (dir / "bad.txt").string();
  std::ofstream(path) << "1 'a' 1\n2 'b' 1\n3 'cd' 7\n";
  const std::string msg = error_of([&] { WorldTokenizer::from_vocab_file(path); });
  EXPECT_NE(msg.find(path + ":3: "), std::string::npos) << msg;
  EXPECT_NE(error_of([&] {
              WorldTokenizer::from_vocab_file((dir / "missing.txt").string());
            }).find("cannot open"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(VocabFile, VocabWithoutEverySingleByteIsRejected) {
  // Valid lines, but byte 0x01 has no token: some input could not be encoded.
  const auto dir = test::make_temp_dir("vocab-bytes");
  const auto path = (dir / "partial.txt").string();
  std::ofstream(path) << "1 '\\x00' 1\n";
  const std::string msg = error_of([&] { WorldTokenizer::from_vocab_file(path); });
  EXPECT_NE(msg.find("no token for the single byte 0x01"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rwkvd::engine
