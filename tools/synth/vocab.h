#pragma once
// The tokenizer metadata of a synthetic model, in the form llama.cpp's `rwkv` tokenizer reads:
// escaped token strings, token types, and (world vocab only) chat template and EOT id.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rwkvd::tools::synth {

// llama.cpp token types.
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenControl = 3;
constexpr int32_t kTokenUnused = 5;

struct Vocab {
  std::vector<std::string> tokens;  // escaped, as stored in tokenizer.ggml.tokens
  std::vector<int32_t> types;
  bool world = false;  // from rwkv_vocab_v20230424.txt: adds chat template and EOT
};

// The raw bytes of each line of rwkv_vocab_v20230424.txt ("<id> <python literal> <length>"),
// index 0 = id 1 (engine/vocab_file.h parses them). Throws EngineError naming the file (and
// line) on anything unexpected, including a gap in the ids.
std::vector<std::string> read_world_vocab(const std::string& path);

// Token bytes for ids 1..n-1 when no vocab file is used: the 256 single bytes (id = byte + 1,
// as in the world vocab), then deterministic multi-byte tokens (common-letter n-grams), so
// text tokenizes into something better than bytes.
std::vector<std::string> generated_token_bytes(uint32_t n_vocab);

// The whole vocabulary of `n_vocab` ids: id 0 "<s>" (CONTROL), then the world vocab lines
// (padded with "[PAD<id>]" UNUSED tokens past its end) or, with no file, generated tokens.
Vocab make_vocab(uint32_t n_vocab, const std::optional<std::string>& world_vocab_path);

}  // namespace rwkvd::tools::synth
