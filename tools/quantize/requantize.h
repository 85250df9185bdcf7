#pragma once
// `rwkvd quantize`: rewrites an RWKV-7 GGUF with llama.cpp's per-tensor type policy for a file
// type (Q4_K_M, Q5_K_M, Q8_0, ...). Metadata is copied (general.file_type and
// general.quantization_version set); each tensor is converted a chunk of rows at a time, so
// memory stays bounded whatever the model size, and the rows of a chunk are quantized on all
// cores.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "engine/quant/type_policy.h"

namespace rwkvd::tools::quantize {

using Progress = std::function<void(uint64_t done, uint64_t total, std::string_view tensor)>;

struct RequantizeResult {
  uint64_t in_bytes = 0, out_bytes = 0;
  std::map<std::string, uint64_t> tensors_per_type;  // output type name -> count
};

// Throws EngineError on an unreadable input, a non-RWKV-7 file or an unwritable output; the
// output file only appears once complete.
RequantizeResult requantize(const std::string& in_path, const std::string& out_path,
                            engine::QuantFtype ftype, const Progress& progress = {});

}  // namespace rwkvd::tools::quantize
