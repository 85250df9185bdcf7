#pragma once
// `rwkvd convert` as a library call: open a checkpoint (format sniffed from its first bytes),
// plan the llama.cpp layout, build the metadata and vocab, and stream the GGUF out tensor by
// tensor. tools/cmd_convert.cpp adds the command line and the .pth route (tools/pth_to_st.py).
#include <cstdint>
#include <functional>
#include <string>

#include "engine/convert/rwkv7_names.h"
#include "engine/convert/source.h"
#include "engine/quant/type_policy.h"

namespace rwkvd::engine::convert {

struct ConvertOptions {
  std::string input;   // rwkv.cpp .bin or SafeTensors .st
  std::string output;  // the GGUF to write (appears only when complete)
  // "auto" (F16 if the checkpoint's matrices are 16-bit, else F32) or a file type: f32, f16,
  // bf16 (llama.cpp's converter's choices), q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k
  // (llama_model_quantize's choices; see type_policy.h).
  std::string type = "auto";
  // rwkv_vocab_v20230424.txt for world models. Empty: the file of that name beside the input if
  // there is one, else a byte vocab (models with 256 tokens only).
  std::string vocab;
  std::string name;                               // general.name; empty: default_model_name(input)
  LoraLayout lora_layout = LoraLayout::kUnknown;  // kUnknown: the checkpoint's, or from shapes
};

struct ConvertSummary {
  std::string format;
  Rwkv7Dims dims;
  QuantFtype file_type = QuantFtype::F32;
  std::string vocab;  // "byte" or the vocab file used
  size_t n_tensors = 0;
  uint64_t file_bytes = 0;
};

// Called after each tensor is written: how many are done, of how many, and the last one's name.
using ConvertProgress = std::function<void(size_t done, size_t total, const std::string& name)>;

// Throws EngineError naming the file (and tensor or key) on any problem; a failed conversion
// leaves no output file behind.
ConvertSummary convert_to_gguf(const ConvertOptions& options, const ConvertProgress& progress = {});

// Opens a .bin or .st by its first bytes. A zip (a .pth) or anything else gets a message
// saying what is supported.
SourceModel open_checkpoint(const std::string& path);

// The input's file name without its extension and without a trailing precision tag that names
// the file rather than the model ("-FP16", "_fp32", "-bf16", ...).
std::string default_model_name(const std::string& path);

// rwkv_vocab_v20230424.txt in the same directory as `path`, or "" if there is none.
std::string vocab_beside(const std::string& path);

}  // namespace rwkvd::engine::convert
