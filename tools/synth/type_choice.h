#pragma once
// Which ggml type each tensor of a synthetic model gets, so a synthetic file has the same type
// mix as one llama.cpp would make (fixtures README, "Types"):
//   f32: everything F32.
//   f16: convert_hf_to_gguf --outtype f16: 1-D tensors, time_mix_w1/w2 and lerp_fused stay
//        F32; every other matrix is F16.
//   quantized: llama_model_quantize's choices, from engine/quant/type_policy.h: 1-D tensors and
//        the LoRA / lerp tensors it excludes by name stay F32; the big matrices get the base
//        type and output.weight Q6_K (Q8_0 for q8_0), with llama.cpp's fallbacks when ne[0] is
//        not a whole number of blocks.
#include <cstdint>
#include <span>
#include <string_view>

#include "engine/ggml_type.h"
#include "tools/synth/config.h"

namespace rwkvd::tools::synth {

engine::GgmlType tensor_type(FileType ftype, std::string_view name, std::span<const int64_t> ne);

}  // namespace rwkvd::tools::synth
