#pragma once
// The RWKV "world" tokenizer: greedy longest match over bytes (docs/TOKENIZER.md).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::engine {

class GgufFile;

class WorldTokenizer {
 public:
  // From a GGUF's tokenizer.ggml.tokens (llama.cpp's escaped strings).
  static std::unique_ptr<WorldTokenizer> from_gguf(const GgufFile& file);
  // From rwkv_vocab_v20230424.txt (Python literals, one per line).
  static std::unique_ptr<WorldTokenizer> from_vocab_file(const std::string& path);
  // From raw token bytes indexed by id (an empty string: the id has no bytes, never produced).
  static std::unique_ptr<WorldTokenizer> from_token_bytes(std::vector<std::string> tokens);

  ~WorldTokenizer();
  std::vector<int32_t> encode(std::string_view bytes) const;
  // Concatenated bytes of the ids; throws EngineError for an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;
  uint32_t vocab_size() const;
  std::string_view token_bytes(int32_t id) const;

 private:
  struct Impl;
  explicit WorldTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes a token stream to text pieces that are always whole UTF-8: an unfinished sequence at
// the end is held back until the next token completes it (or flush() gives it up as is).
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const WorldTokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);
  std::string flush();

 private:
  const WorldTokenizer& tok_;
  std::string pending_;
};

}  // namespace rwkvd::engine
