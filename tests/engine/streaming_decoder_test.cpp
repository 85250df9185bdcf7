// StreamingDecoder: text pieces never end inside a UTF-8 character; bytes that can never become
// valid are passed through; flush() gives up the held tail.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/tokenizer.h"
#include "engine/utf8.h"
#include "tests/engine/tokenizer_helpers.h"
#include "tests/engine/world_fixtures.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine {
namespace {

// Every single byte (id = byte) plus the multi-byte pieces the tests split characters into.
std::unique_ptr<WorldTokenizer> small_vocab() {
  auto t = test::byte_tokens();
  t.push_back("\xE4\xB8");  // 256: the first two bytes of 中 (E4 B8 AD)
  t.push_back("\xF0\x9F");  // 257: an emoji's first two bytes
  t.push_back(
      "\xAD"
      "ok");             // 258: the end of 中 and then ASCII
  t.push_back("a\xC3");  // 259: ASCII then the lead of é (C3 A9)
  return WorldTokenizer::from_token_bytes(std::move(t));
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    if ((n = utf8_sequence_length(s, i)) == 0) return false;
  }
  return true;
}

TEST(StreamingDecoder, HoldsAChineseCharacterSplitAcrossTokens) {
  const auto tok = small_vocab();
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.push('A'), "A");
  EXPECT_EQ(d.push(256), "");  // E4 B8: unfinished
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.push(258), "中ok");
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamingDecoder, EmojiFromAFragmentAndSingleBytes) {
  const auto tok = small_vocab();
  StreamingDecoder d(*tok);
  // U+1FAE8 = F0 9F AB A8: the world vocab gives [F0 9F] [AB] [A8].
  EXPECT_EQ(d.push(257), "");
  EXPECT_EQ(d.push(0xAB), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.push(0xA8), "\xF0\x9F\xAB\xA8");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(StreamingDecoder, TextBeforeAnUnfinishedTailIsEmitted) {
  const auto tok = small_vocab();
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.push(259), "a");  // "a" + C3
  EXPECT_EQ(d.push(0xA9), "é");
}

TEST(StreamingDecoder, FlushGivesUpTheTailAsIs) {
  const auto tok = small_vocab();
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.push(256), "");
  EXPECT_EQ(d.flush(), "\xE4\xB8");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.flush(), "");
  EXPECT_EQ(d.push('x'), "x");
}

TEST(StreamingDecoder, SequencesThatCanNeverCompleteAreEmittedAsIs) {
  const auto tok = small_vocab();
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.push(256), "");
  EXPECT_EQ(d.push('o'), "\xE4\xB8o");  // the E4 B8 can no longer complete
  EXPECT_EQ(d.push(0xB8), "\xB8");      // a lone continuation byte
  EXPECT_EQ(d.push(0xC0), "\xC0");      // never a valid lead
  EXPECT_EQ(d.push(0xFF), "\xFF");
  EXPECT_EQ(d.push(0xE0), "");          // E0 may still complete ...
  EXPECT_EQ(d.push(0x80), "\xE0\x80");  // ... but E0 80 is overlong: never valid
  EXPECT_EQ(d.push(0xED), "");
  EXPECT_EQ(d.push(0xA0), "\xED\xA0");  // a surrogate
  EXPECT_EQ(d.push(0xF4), "");
  EXPECT_EQ(d.push(0x90), "\xF4\x90");  // beyond U+10FFFF
}

TEST(StreamingDecoder, IdsWithoutBytesAndBadIds) {
  auto t = test::byte_tokens();
  t.insert(t.begin(), "");  // id 0: no bytes, bytes are id = byte + 1 as in the world vocab
  const auto tok = WorldTokenizer::from_token_bytes(std::move(t));
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.push(0xE4 + 1), "");
  EXPECT_EQ(d.push(0), "");  // end-of-text gives nothing and keeps the tail
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_THROW(d.push(257), EngineError);
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.flush(), "\xE4");
}

TEST(StreamingDecoder, WorldVocabSplitsGiveWholeCharacters) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(cases_path, test::kWorldCases);
  const auto& tok = test::world_tokenizer(vocab);
  // 丒 (U+4E12) is [E4 B8][92] in the world vocab (中 is one token); U+1FAE8 is [F0 9F][AB][A8].
  EXPECT_EQ(tok.encode("丒"), (std::vector<int32_t>{3025, 0x92 + 1}));
  StreamingDecoder d(tok);
  EXPECT_EQ(d.push(3025), "");
  EXPECT_EQ(d.push(0x92 + 1), "丒");
  EXPECT_EQ(tok.encode("\xF0\x9F\xAB\xA8"), (std::vector<int32_t>{3319, 172, 169}));
  EXPECT_EQ(d.push(3319), "");
  EXPECT_EQ(d.push(172), "");
  EXPECT_EQ(d.push(169), "\xF0\x9F\xAB\xA8");
  // Over every case: the pieces join to the input, and for text every piece is valid UTF-8.
  for (const auto& c : test::tokenizer_cases(cases_path)) {
    StreamingDecoder s(tok);
    std::string joined;
    for (int32_t id : c.ids) {
      const std::string piece = s.push(id);
      if (c.is_text) {
        ASSERT_TRUE(valid_utf8(piece)) << c.label;
      }
      joined += piece;
    }
    if (c.is_text) {
      EXPECT_EQ(s.pending_bytes(), 0u) << c.label;
    }
    joined += s.flush();
    EXPECT_EQ(joined, c.bytes) << c.label;
  }
}

}  // namespace
}  // namespace rwkvd::engine
