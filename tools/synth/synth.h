#pragma once
// Writes a random-weight RWKV-7 GGUF in llama.cpp's layout: every metadata key and tensor of
// the fixtures README, tokenizer included. Tensors are generated and written one chunk of rows
// at a time, so memory stays at a few MB whatever the model size.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tools/synth/config.h"

namespace rwkvd::tools::synth {

// Called after each chunk: bytes written so far, file size, the tensor being written.
using Progress = std::function<void(uint64_t done, uint64_t total, std::string_view tensor)>;

// Throws EngineError (bad config, unwritable path, a type this build cannot produce); the
// output file only appears once complete.
void synthesize(const SynthConfig& cfg, const std::string& out_path, const Progress& progress = {});

}  // namespace rwkvd::tools::synth
