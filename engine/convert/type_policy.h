#pragma once
// Which ggml type each output tensor gets, per requested file type, and the general.file_type
// value llama.cpp records for it.
#include <cstdint>

#include "engine/convert/rwkv7_names.h"
#include "engine/ggml_type.h"

namespace rwkvd::engine::convert {

// The tensor's type in a file of `file_type` (F32 or F16). F16 follows llama.cpp's
// convert_hf_to_gguf --outtype f16: 1-D tensors, time_mix_w1/w2 and time_mix_lerp_fused stay
// F32 (the decay LoRA and the lerps are precision-sensitive and tiny); every other matrix is F16.
GgmlType tensor_type(const MappedTensor& t, GgmlType file_type);

// llama_ftype: 0 for all F32, 1 for mostly F16.
uint32_t llama_file_type(GgmlType file_type);

}  // namespace rwkvd::engine::convert
