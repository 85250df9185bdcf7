#pragma once
// Which ggml type each output tensor gets for the file type asked for (--type).
//  - f32, f16, bf16: what llama.cpp's convert_hf_to_gguf --outtype writes. 1-D tensors,
//    time_mix_w1/w2 and time_mix_lerp_fused stay F32 (the decay LoRA and the lerps are small and
//    precision-sensitive); every other matrix, the a/v/g LoRAs included, takes the type.
//  - quantised file types (q8_0, q4_k_m, ...): what llama_model_quantize would make of the F32
//    file, i.e. engine/quant/type_policy.h (it never quantises the LoRAs, keeps them F32).
#include <optional>
#include <string_view>

#include "engine/convert/rwkv7_names.h"
#include "engine/ggml_type.h"
#include "engine/quant/type_policy.h"

namespace rwkvd::engine::convert {

// "f32", "F16", "q4_k_m", ... (case-insensitive); nullopt if unknown.
std::optional<QuantFtype> parse_file_type(std::string_view name);

// Whether the file type is a quantisation (general.quantization_version is then written).
bool is_quantised(QuantFtype ftype);

GgmlType tensor_type(const MappedTensor& t, QuantFtype ftype);

}  // namespace rwkvd::engine::convert
