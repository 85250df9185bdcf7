#pragma once
// Shared by the tokenizer tests: the world vocab and the 610 reference cases, loaded once per
// test binary (callers check the fixture exists with RWKVD_FIXTURE first).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/tokenizer.h"

namespace rwkvd::test {

inline constexpr const char* kWorldVocab = "tokenizer/rwkv_vocab_v20230424.txt";
inline constexpr const char* kWorldCases = "tokenizer/cases.jsonl";

struct TokenizerCase {
  std::string bytes;  // the input, raw
  std::vector<int32_t> ids;
  std::string label;     // "cases.jsonl:LINE (cat)" for failure messages
  bool is_text = false;  // given as valid UTF-8 text (not bytes_hex)
};

inline const engine::WorldTokenizer& world_tokenizer(const std::filesystem::path& vocab) {
  static const auto tok = engine::WorldTokenizer::from_vocab_file(vocab.string());
  return *tok;
}

inline std::string bytes_from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::runtime_error("odd hex length");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

inline const std::vector<TokenizerCase>& tokenizer_cases(const std::filesystem::path& path) {
  static const std::vector<TokenizerCase> cases = [&] {
    std::vector<TokenizerCase> out;
    std::ifstream in(path);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      TokenizerCase c;
      c.is_text = j.contains("text");
      c.bytes = c.is_text ? j["text"].get<std::string>()
                          : bytes_from_hex(j["bytes_hex"].get<std::string>());
      c.ids = j["ids"].get<std::vector<int32_t>>();
      c.label = "cases.jsonl:" + std::to_string(n) + " (" + j["cat"].get<std::string>() + ")";
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

}  // namespace rwkvd::test
