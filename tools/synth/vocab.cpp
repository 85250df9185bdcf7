#include "tools/synth/vocab.h"

#include "engine/error.h"
#include "engine/gguf_vocab.h"
#include "engine/vocab_file.h"

namespace rwkvd::tools::synth {
using engine::EngineError;

std::vector<std::string> read_world_vocab(const std::string& path) {
  // The engine's reader (shared with the tokenizer) parses and checks every line; index 0 is
  // id 0, which the file does not define.
  std::vector<std::string> by_id = engine::read_vocab_file(path);
  if (by_id.size() < 2) throw EngineError(path + ": no tokens in the vocab file");
  for (size_t id = 1; id < by_id.size(); ++id) {
    if (by_id[id].empty()) {
      throw EngineError(path + ": id " + std::to_string(id) +
                        " is missing; a world vocab numbers its tokens 1..N without gaps");
    }
  }
  by_id.erase(by_id.begin());
  return by_id;
}

std::vector<std::string> generated_token_bytes(uint32_t n_vocab) {
  std::vector<std::string> out;
  if (n_vocab <= 1) return out;
  const size_t want = n_vocab - 1;
  out.reserve(want);
  for (int b = 0; b < 256 && out.size() < want; ++b)
    out.push_back(std::string(1, static_cast<char>(b)));
  // N-grams over letters in rough English frequency order, space first: short, common pieces
  // come first, so a small vocab still merges the most frequent pairs.
  static constexpr std::string_view kChars =
      " etaoinsrhldcumfpgwybvkxjqz.,ETAOINSRHLDCUMFPGWYBVKXJQZ";
  std::string gram;
  for (size_t n = 2; out.size() < want; ++n) {
    std::vector<size_t> idx(n, 0);
    while (out.size() < want) {
      gram.clear();
      for (size_t k : idx) gram += kChars[k];
      out.push_back(gram);
      size_t d = n;  // odometer increment, last position fastest
      while (d > 0 && ++idx[d - 1] == kChars.size()) idx[--d] = 0;
      if (d == 0) break;
    }
  }
  return out;
}

Vocab make_vocab(uint32_t n_vocab, const std::optional<std::string>& world_vocab_path) {
  if (n_vocab == 0) throw EngineError("vocab size must be at least 1");
  Vocab v;
  v.tokens.reserve(n_vocab);
  v.types.reserve(n_vocab);
  v.tokens.push_back("<s>");
  v.types.push_back(kTokenControl);
  std::vector<std::string> bytes;
  if (world_vocab_path) {
    bytes = read_world_vocab(*world_vocab_path);
    v.world = true;
  } else {
    bytes = generated_token_bytes(n_vocab);
  }
  for (uint32_t id = 1; id < n_vocab; ++id) {
    if (id - 1 < bytes.size()) {
      v.tokens.push_back(engine::escape_gguf_token(bytes[id - 1]));
      v.types.push_back(kTokenNormal);
    } else {
      v.tokens.push_back("[PAD" + std::to_string(id) + "]");
      v.types.push_back(kTokenUnused);
    }
  }
  return v;
}

}  // namespace rwkvd::tools::synth
