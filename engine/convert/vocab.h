#pragma once
// The tokenizer metadata of an RWKV-7 GGUF (tokenizer.ggml.model "rwkv"), built the way
// llama.cpp's converter builds it. Tokens are stored escaped (engine/gguf_vocab.h).
#include <cstdint>
#include <string>
#include <vector>

namespace rwkvd::engine::convert {

// llama.cpp's token types (llama_token_type).
inline constexpr int32_t kTokenNormal = 1;
inline constexpr int32_t kTokenControl = 3;
inline constexpr int32_t kTokenUnused = 5;

struct GgufVocab {
  std::vector<std::string> tokens;  // escaped, one per id
  std::vector<int32_t> types;
  bool world = false;  // a world vocab also gets a chat template and the "\n\n" EOT token
};

// The vocab of rwkv.cpp's tiny test models: token i is byte i, all NORMAL. n_vocab must be 256.
GgufVocab byte_vocab(int64_t n_vocab);

// A world vocab: id 0 is "<s>" (CONTROL), id i >= 1 is `token_bytes[i]` (NORMAL; index 0 is
// ignored), ids past the file up to n_vocab are "[PAD<i>]" (UNUSED). Throws EngineError if the
// file has more tokens than the model or a gap (an empty token) below its last id.
GgufVocab world_vocab(const std::vector<std::string>& token_bytes, int64_t n_vocab,
                      const std::string& source);

}  // namespace rwkvd::engine::convert
