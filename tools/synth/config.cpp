#include "tools/synth/config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string>

#include "engine/error.h"

namespace rwkvd::tools::synth {
namespace {

struct FileTypeInfo {
  FileType type;
  std::string_view name;
  engine::QuantFtype ftype;
};
constexpr std::array<FileTypeInfo, 7> kFileTypes{{
    {FileType::kF32, "f32", engine::QuantFtype::F32},
    {FileType::kF16, "f16", engine::QuantFtype::F16},
    {FileType::kQ8_0, "q8_0", engine::QuantFtype::Q8_0},
    {FileType::kQ4_0, "q4_0", engine::QuantFtype::Q4_0},
    {FileType::kQ4_K_M, "q4_k_m", engine::QuantFtype::Q4_K_M},
    {FileType::kQ5_K_M, "q5_k_m", engine::QuantFtype::Q5_K_M},
    {FileType::kQ6_K, "q6_k", engine::QuantFtype::Q6_K},
}};

constexpr std::array<Preset, 5> kPresets{{
    {"0.1b", 12, 768},
    {"0.4b", 24, 1024},
    {"1.5b", 24, 2048},
    {"2.9b", 32, 2560},
    {"7.2b", 32, 4096},
}};

const FileTypeInfo& info(FileType t) {
  for (const auto& i : kFileTypes) {
    if (i.type == t) return i;
  }
  throw engine::EngineError("internal: unknown synth file type");
}

uint32_t rank(uint32_t d, double e, double m) {
  // std::nearbyint rounds half to even in the default rounding mode, like Python's round().
  const double r = std::nearbyint(std::pow(static_cast<double>(d), e) * m / 32.0);
  return static_cast<uint32_t>(std::max(1.0, r)) * 32;
}

}  // namespace

std::optional<FileType> parse_file_type(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& i : kFileTypes) {
    if (i.name == lower) return i.type;
  }
  return std::nullopt;
}

std::string_view file_type_name(FileType t) {
  return info(t).name;
}
engine::QuantFtype quant_ftype(FileType t) {
  return info(t).ftype;
}
uint32_t llama_ftype(FileType t) {
  return static_cast<uint32_t>(info(t).ftype);
}
bool is_quantized(FileType t) {
  return t != FileType::kF32 && t != FileType::kF16;
}

LoraRanks default_lora_ranks(uint32_t n_embd) {
  return {rank(n_embd, 0.5, 1.8), rank(n_embd, 0.5, 1.8), rank(n_embd, 0.5, 1.3),
          rank(n_embd, 0.8, 0.6)};
}

std::span<const Preset> presets() {
  return kPresets;
}

std::optional<Preset> find_preset(std::string_view name) {
  for (const auto& p : kPresets) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

void SynthConfig::validate() const {
  auto fail = [](const std::string& m) { throw engine::EngineError("synth: " + m); };
  // The same bounds as Rwkv7Model::from_gguf, so a synthesized file always loads.
  if (layers == 0 || layers > 1024) fail("--layers must be in 1..1024");
  if (embd == 0 || embd > 65536) fail("--embd must be in 1..65536");
  if (head_size == 0 || head_size > 1024) fail("--head-size must be in 1..1024");
  if (embd % head_size != 0) {
    fail("--embd " + std::to_string(embd) + " is not a multiple of --head-size " +
         std::to_string(head_size));
  }
  if (vocab < 2 || vocab > (1u << 24)) fail("--vocab must be in 2..16777216");
  if (n_ffn() == 0 || n_ffn() > 16u * 65536) fail("--ffn must be in 1..1048576");
}

}  // namespace rwkvd::tools::synth
