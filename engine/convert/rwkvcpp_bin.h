#pragma once
// Reader for rwkv.cpp's own model files (`.bin`, as its convert_pytorch_to_ggml.py writes them):
//
//   header     int32 magic = 0x67676d66 ("fmgg" on disk), version (100 or 101),
//              n_vocab, n_embed, n_layer, data_type
//   parameter  int32 dim_count, key_length, data_type; int32 shape[dim_count] (reversed:
//              shape[0] is the contiguous dimension, like GGUF's ne); key bytes; data
//   ...        parameters follow one another without padding until the end of the file.
//
// data_type 0 is FP32 and 1 is FP16. Quantised files (2..) are refused: convert rwkv.cpp's FP16
// or FP32 file instead. rwkv.cpp already stores the RWKV-7 LoRAs transposed and the six token
// shift lerps fused (`att.x_rwkvag`), so its matrices map onto llama.cpp's byte for byte.
#include <string>

#include "engine/convert/source.h"

namespace rwkvd::engine::convert {

inline constexpr uint32_t kRwkvCppMagic = 0x67676d66;

// Whether `head` (the first bytes of a file) starts with rwkv.cpp's magic.
bool looks_like_rwkvcpp_bin(std::span<const std::byte> head);

// Maps and indexes `path`. Shapes are returned in PyTorch order (the file's reversed). Throws
// EngineError naming the file (and the parameter, with its offset) on a bad magic or version,
// a truncated file, a quantised or unknown data type, or a header that disagrees with the
// tensors (n_vocab/n_embed against emb.weight, n_layer against the blocks present).
SourceModel read_rwkvcpp_bin(const std::string& path);

}  // namespace rwkvd::engine::convert
