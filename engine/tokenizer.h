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

// Immutable after construction, so one instance can serve any number of threads.
class WorldTokenizer {
 public:
  // From a GGUF's tokenizer.ggml.tokens (llama.cpp's escaped strings). Ids whose
  // tokenizer.ggml.token_type is CONTROL (`<s>`) or UNUSED (`[PAD65530]`...) have no bytes.
  static std::unique_ptr<WorldTokenizer> from_gguf(const GgufFile& file);
  // From rwkv_vocab_v20230424.txt (Python literals, one per line). The vocab size is the largest
  // id in the file plus one (65530 for the world vocab; id 0 has no bytes).
  static std::unique_ptr<WorldTokenizer> from_vocab_file(const std::string& path);
  // From raw token bytes indexed by id (an empty string: the id has no bytes, never produced).
  // Every single byte must be a token and no two ids may share bytes; else EngineError.
  static std::unique_ptr<WorldTokenizer> from_token_bytes(std::vector<std::string> tokens);

  ~WorldTokenizer();
  std::vector<int32_t> encode(std::string_view bytes) const;
  // Appends the ids of `bytes` to `out`: lets a caller reuse one buffer and allocate nothing.
  void encode_into(std::string_view bytes, std::vector<int32_t>& out) const;
  // Concatenated bytes of the ids; throws EngineError for an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;
  uint32_t vocab_size() const;
  // The bytes of `id` (empty for ids without bytes); throws EngineError when out of range.
  std::string_view token_bytes(int32_t id) const;

 private:
  struct Impl;
  explicit WorldTokenizer(std::unique_ptr<Impl> impl);
  static std::unique_ptr<WorldTokenizer> make(std::vector<std::string> tokens,
                                              const std::string& source);
  std::unique_ptr<Impl> impl_;
};

// Decodes a token stream to text pieces that are always whole UTF-8: an unfinished sequence at
// the end is held back until the next token completes it (or flush() gives it up as is).
// Bytes that can never become valid UTF-8 (a stray continuation byte, an unfinished sequence
// followed by something else, 0xC0/0xC1/0xF5..0xFF) are passed through unchanged rather than
// replaced or held: the stream stays byte-exact, and the caller chooses how to show them.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const WorldTokenizer& tok) : tok_(tok) {}
  // The text that became complete with `id` (often empty while a character is split). Throws
  // EngineError for an out-of-range id, leaving the decoder unchanged.
  std::string push(int32_t id);
  // Whatever is still held back (at most 3 bytes), as is; the decoder is then empty.
  std::string flush();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const WorldTokenizer& tok_;
  std::string pending_;
};

}  // namespace rwkvd::engine
