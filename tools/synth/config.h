#pragma once
// What `rwkvd synth` makes: the hyper-parameters of a random-weight RWKV-7, its presets, its
// LoRA ranks and its file type.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/quant/type_policy.h"

namespace rwkvd::tools::synth {

// The llama.cpp "ftype" of the whole file: which type each tensor gets (type_choice.h).
enum class FileType { kF32, kF16, kQ8_0, kQ4_0, kQ4_K_M, kQ5_K_M, kQ6_K };
std::optional<FileType> parse_file_type(std::string_view name);  // "f32", "q4_k_m", ...
std::string_view file_type_name(FileType t);
engine::QuantFtype quant_ftype(FileType t);
uint32_t llama_ftype(FileType t);  // general.file_type
bool is_quantized(FileType t);

struct LoraRanks {
  uint32_t w = 0, a = 0, v = 0, g = 0;  // decay, iclr (in-context lr), value residual, gate
};
// llama.cpp's converter default: max(1, round(D^e * m / 32)) * 32 with (e, m) = (0.5, 1.8) for
// decay and iclr, (0.5, 1.3) for value, (0.8, 0.6) for gate; round() is Python's (half to
// even).
LoraRanks default_lora_ranks(uint32_t n_embd);

struct Preset {
  std::string_view name;
  uint32_t layers, embd;
};
std::span<const Preset> presets();
std::optional<Preset> find_preset(std::string_view name);

struct SynthConfig {
  uint32_t layers = 0;
  uint32_t embd = 0;
  uint32_t vocab = 65536;
  uint32_t ffn = 0;  // 0: 4 * embd
  uint32_t head_size = 64;
  FileType type = FileType::kF32;
  uint64_t seed = 0;
  std::string name;                       // general.name; empty: derived from the shape
  std::optional<std::string> vocab_file;  // rwkv_vocab_v20230424.txt; none: generated tokens
  // Every weight zero, left as holes in the file: a model of real shapes written in a moment
  // and taking no disk, for plans (`rwkvd inspect --plan`) and loading tests; its outputs are
  // meaningless.
  bool zeros = false;

  uint32_t n_ffn() const { return ffn != 0 ? ffn : 4 * embd; }
  LoraRanks ranks() const { return default_lora_ranks(embd); }
  // Throws EngineError on a shape the loader would refuse (or that cannot be built).
  void validate() const;
};

}  // namespace rwkvd::tools::synth
