// The world tokenizer against the reference fixtures: every case exact from the vocab file and
// from GGUFs, the special-token rules, decode, and a brute-force cross-check.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/gguf_vocab.h"
#include "engine/tokenizer.h"
#include "tests/engine/world_fixtures.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_writer.h"

namespace rwkvd::engine {
namespace {

using test::tokenizer_cases;
using test::world_tokenizer;

constexpr uint32_t kWorldRows = 65536;  // the model's embedding rows; 65530.. are padding

// A vocab-only GGUF laid out the way llama.cpp's converter writes a world vocab: id 0 `<s>`
// (CONTROL), the vocab file's tokens escaped (NORMAL), then `[PAD65530]`.. (UNUSED).
std::filesystem::path write_world_gguf(const WorldTokenizer& vocab) {
  std::vector<std::string> tokens{"<s>"};
  std::vector<int32_t> types{3};
  for (uint32_t id = 1; id < kWorldRows; ++id) {
    if (id < vocab.vocab_size()) {
      tokens.push_back(escape_gguf_token(vocab.token_bytes(static_cast<int32_t>(id))));
      types.push_back(1);
    } else {
      tokens.push_back("[PAD" + std::to_string(id) + "]");
      types.push_back(5);
    }
  }
  test::GgufWriter w;
  w.add_string("general.architecture", "rwkv7");
  w.add_string("tokenizer.ggml.model", "rwkv");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  const auto path = test::make_temp_dir("world-gguf") / "world-vocab.gguf";
  w.write(path);
  return path;
}

const WorldTokenizer& world_gguf_tokenizer(const WorldTokenizer& vocab) {
  static const auto tok = [&] {
    const auto path = write_world_gguf(vocab);
    auto t = WorldTokenizer::from_gguf(*GgufFile::open(path.string()));
    std::filesystem::remove_all(path.parent_path());
    return t;
  }();
  return *tok;
}

TEST(WorldTokenizer, VocabFileHasTheDocumentedShape) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  const auto& tok = world_tokenizer(vocab);
  EXPECT_EQ(tok.vocab_size(), 65530u);
  EXPECT_EQ(tok.token_bytes(0), "");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(tok.token_bytes(b + 1), std::string(1, static_cast<char>(b))) << "byte " << b;
  }
  EXPECT_EQ(tok.token_bytes(33), " ");
  EXPECT_EQ(tok.token_bytes(2423), "\xC2\x80");      // '\x80' is U+0080 in a str literal
  EXPECT_EQ(tok.token_bytes(9804), "\xE2\x80\x82");  // '\u2002'
  EXPECT_EQ(tok.token_bytes(3025), "\xE4\xB8");      // b'\xe4\xb8'
  EXPECT_EQ(tok.token_bytes(65529), std::string(128, ' '));
}

TEST(WorldTokenizer, EncodesEveryFixtureCaseExactly) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(cases_path, test::kWorldCases);
  const auto& tok = world_tokenizer(vocab);
  const auto& cases = tokenizer_cases(cases_path);
  ASSERT_EQ(cases.size(), 610u);
  int failures = 0;
  for (const auto& c : cases) {
    const auto ids = tok.encode(c.bytes);
    if (ids != c.ids && ++failures <= 10) ADD_FAILURE() << c.label << ": ids differ";
  }
  EXPECT_EQ(failures, 0);
}

TEST(WorldTokenizer, DecodeOfEncodeGivesBackTheBytes) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(cases_path, test::kWorldCases);
  const auto& tok = world_tokenizer(vocab);
  for (const auto& c : tokenizer_cases(cases_path)) {
    EXPECT_EQ(tok.decode(tok.encode(c.bytes)), c.bytes) << c.label;
    EXPECT_EQ(tok.decode(c.ids), c.bytes) << c.label;
  }
}

TEST(WorldTokenizer, NeverProducesIdsWithoutBytes) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(cases_path, test::kWorldCases);
  const auto& tok = world_tokenizer(vocab);
  const auto& gguf = world_gguf_tokenizer(tok);
  for (const auto& c : tokenizer_cases(cases_path)) {
    for (const auto* t : {&tok, &gguf}) {
      for (int32_t id : t->encode(c.bytes)) {
        ASSERT_TRUE(id > 0 && id < 65530) << c.label << ": produced id " << id;
      }
    }
  }
}

TEST(WorldTokenizer, BenchEmailMatchesItsCase) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(email, "tokenizer/bench_email.txt");
  const std::string text = test::read_text_file(email);
  ASSERT_EQ(text.size(), 3329u);
  EXPECT_EQ(world_tokenizer(vocab).encode(text).size(), 854u);
}

TEST(WorldTokenizer, SpecialTokenTextIsOrdinaryText) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  const auto& tok = world_tokenizer(vocab);
  const auto& gguf = world_gguf_tokenizer(tok);
  const std::vector<int32_t> eot{61, 125, 25258, 7588, 2318, 125, 63};
  const std::vector<int32_t> s{61, 116, 63};
  for (const auto* t : {&tok, &gguf}) {
    EXPECT_EQ(t->encode("<|endoftext|>"), eot);
    EXPECT_EQ(t->encode("<s>"), s);
    for (const char* pad : {"[PAD65530]", "[PAD65535]"}) {
      const auto ids = t->encode(pad);
      EXPECT_EQ(t->decode(ids), pad);
      EXPECT_EQ(ids, tok.encode(pad));  // whatever the GGUF holds, the same as the vocab file
      for (int32_t id : ids) EXPECT_LT(id, 65530) << pad;
    }
  }
}

TEST(WorldTokenizer, GgufBuiltFromTheVocabEncodesIdentically) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(cases_path, test::kWorldCases);
  const auto& tok = world_tokenizer(vocab);
  const auto& gguf = world_gguf_tokenizer(tok);
  EXPECT_EQ(gguf.vocab_size(), kWorldRows);
  for (int32_t id = 1; id < 65530; ++id) {
    ASSERT_EQ(gguf.token_bytes(id), tok.token_bytes(id)) << "id " << id;
  }
  for (const auto& c : tokenizer_cases(cases_path)) {
    EXPECT_EQ(gguf.encode(c.bytes), c.ids) << c.label;
  }
}

TEST(WorldTokenizer, ControlAndUnusedIdsHaveNoBytes) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  const auto& gguf = world_gguf_tokenizer(world_tokenizer(vocab));
  for (int32_t id : {0, 65530, 65531, 65535}) EXPECT_EQ(gguf.token_bytes(id), "") << id;
  const std::vector<int32_t> ids{0, 33155, 65530, 45, 65535};
  EXPECT_EQ(gguf.decode(ids), "Hello,");
}

TEST(WorldTokenizer, DecodeRejectsOutOfRangeIds) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  const auto& tok = world_tokenizer(vocab);
  const auto& gguf = world_gguf_tokenizer(tok);
  try {
    (void)tok.decode(std::vector<int32_t>{33155, 65530});
    FAIL() << "no exception";
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("65530"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)gguf.decode(std::vector<int32_t>{65536}), EngineError);
  EXPECT_THROW((void)tok.decode(std::vector<int32_t>{-1}), EngineError);
  EXPECT_THROW((void)tok.token_bytes(1 << 30), EngineError);
}

// Independent check of the greedy rule: at each position try lengths 128..1 against a map.
std::vector<int32_t> brute_force_encode(const std::unordered_map<std::string, int32_t>& vocab,
                                        std::string_view s) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.size();) {
    for (size_t len = std::min<size_t>(128, s.size() - i); len > 0; --len) {
      if (auto it = vocab.find(std::string(s.substr(i, len))); it != vocab.end()) {
        ids.push_back(it->second);
        i += len;
        break;
      }
    }
  }
  return ids;
}

TEST(WorldTokenizer, MatchesBruteForceOnRandomTokenJoins) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  const auto& tok = world_tokenizer(vocab);
  std::unordered_map<std::string, int32_t> map;
  for (int32_t id = 1; id < static_cast<int32_t>(tok.vocab_size()); ++id) {
    map.emplace(tok.token_bytes(id), id);
  }
  std::mt19937 rng(20230424);
  std::uniform_int_distribution<int32_t> any_id(1, static_cast<int32_t>(tok.vocab_size()) - 1);
  for (int round = 0; round < 300; ++round) {
    std::string s;
    const int pieces = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < pieces; ++k) {
      const std::string_view t = tok.token_bytes(any_id(rng));
      // Cut some tokens short so walks stop inside the trie, not only at token ends.
      s += rng() % 3 == 0 ? t.substr(0, 1 + rng() % t.size()) : t;
      if (rng() % 5 == 0) s += static_cast<char>(rng() & 0xFF);
    }
    ASSERT_EQ(tok.encode(s), brute_force_encode(map, s)) << "round " << round;
  }
}

TEST(WorldTokenizer, EncodeIntoAppends) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  const auto& tok = world_tokenizer(vocab);
  std::vector<int32_t> ids{7};
  tok.encode_into("Hello, world!", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 33155, 45, 40213, 34}));
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(WorldTokenizer, SyntheticAGgufMatchesLlamaCpp) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.f32.gguf");
  RWKVD_FIXTURE(expected_path, "rwkv7/synthetic-A.tokenize.json");
  const auto expected = nlohmann::json::parse(test::read_text_file(expected_path));
  const auto tok = WorldTokenizer::from_gguf(*GgufFile::open(model.string()));
  EXPECT_EQ(tok->vocab_size(), 1024u);
  const auto text = expected["text"].get<std::string>();
  ASSERT_EQ(text, test::bytes_from_hex(expected["text_utf8_hex"].get<std::string>()));
  EXPECT_EQ(tok->encode(text), expected["ids"].get<std::vector<int32_t>>());
}

TEST(WorldTokenizer, SyntheticAGgufTokensAreTheVocabFilesFirstIds) {
  RWKVD_FIXTURE(vocab, test::kWorldVocab);
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_k_m.gguf");
  const auto& world = world_tokenizer(vocab);
  const auto tok = WorldTokenizer::from_gguf(*GgufFile::open(model.string()));
  EXPECT_EQ(tok->token_bytes(0), "");  // `<s>`, CONTROL
  for (int32_t id = 1; id < 1024; ++id) {
    ASSERT_EQ(tok->token_bytes(id), world.token_bytes(id)) << "id " << id;
  }
}

TEST(WorldTokenizer, TinyModelByteVocab) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  RWKVD_FIXTURE(text_path, "rwkv7/tiny-rwkv7-834K.text200.txt");
  const auto tok = WorldTokenizer::from_gguf(*GgufFile::open(model.string()));
  ASSERT_EQ(tok->vocab_size(), 256u);
  for (int b = 0; b < 256; ++b) {
    ASSERT_EQ(tok->token_bytes(b), std::string(1, static_cast<char>(b))) << b;
  }
  const std::string text = test::read_text_file(text_path);
  const auto ids = tok->encode(text);
  ASSERT_EQ(ids.size(), text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    EXPECT_EQ(ids[i], static_cast<uint8_t>(text[i]));
  }
  EXPECT_EQ(tok->encode("\"in"), (std::vector<int32_t>{34, 105, 110}));
  EXPECT_EQ(tok->decode(ids), text);
}

}  // namespace
}  // namespace rwkvd::engine
