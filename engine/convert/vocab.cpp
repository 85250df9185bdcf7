#include "engine/convert/vocab.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/gguf_vocab.h"

namespace rwkvd::engine::convert {

GgufVocab byte_vocab(int64_t n_vocab) {
  if (n_vocab != 256) {
    throw EngineError("a byte vocab has 256 tokens, the model has " + std::to_string(n_vocab) +
                      "; pass --vocab rwkv_vocab_v20230424.txt");
  }
  GgufVocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(escape_gguf_token(std::string(1, static_cast<char>(b))));
    v.types.push_back(kTokenNormal);
  }
  return v;
}

GgufVocab world_vocab(const std::vector<std::string>& token_bytes, int64_t n_vocab,
                      const std::string& source) {
  const auto n_file = static_cast<int64_t>(token_bytes.size());
  if (n_file > n_vocab) {
    throw EngineError(source + ": has " + std::to_string(n_file - 1) + " tokens but the model " +
                      "has room for " + std::to_string(n_vocab - 1) + " after <s>");
  }
  GgufVocab v;
  v.world = true;
  v.tokens.push_back("<s>");
  v.types.push_back(kTokenControl);
  for (int64_t i = 1; i < n_file; ++i) {
    const auto& bytes = token_bytes[static_cast<size_t>(i)];
    if (bytes.empty()) throw EngineError(source + ": no token with id " + std::to_string(i));
    v.tokens.push_back(escape_gguf_token(bytes));
    v.types.push_back(kTokenNormal);
  }
  for (int64_t i = std::max<int64_t>(n_file, 1); i < n_vocab; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    v.types.push_back(kTokenUnused);
  }
  return v;
}

}  // namespace rwkvd::engine::convert
