#pragma once
// Which ggml type each RWKV-7 tensor gets when a model is quantised to a given llama.cpp file
// type ("Q4_K_M", ...). It reproduces llama.cpp's llama_model_quantize choices for arch rwkv7
// (checked against the fixtures' manifest in tests/engine/quant_test.cpp), so a file we write
// has the same types as one llama.cpp writes. docs/QUANTIZATION.md has the table.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "engine/ggml_type.h"
#include "engine/gguf.h"

namespace rwkvd::engine {

// llama.cpp's llama_ftype, as written to general.file_type.
enum class QuantFtype : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 7,
  Q5_0 = 8,
  Q5_1 = 9,
  Q4_K_M = 15,
  Q5_K_M = 17,
  Q6_K = 18,
  BF16 = 32,
};

// "q4_k_m", "Q8_0", "f16", ... (case-insensitive); nullopt if not one of the above.
std::optional<QuantFtype> parse_quant_ftype(std::string_view name);
std::string_view quant_ftype_name(QuantFtype ftype);  // "Q4_K_M", ...
// The type most matrices get: Q4_K for Q4_K_M, Q5_K for Q5_K_M, the namesake otherwise.
GgmlType quant_ftype_base_type(QuantFtype ftype);

// The type llama.cpp gives tensor `name` of shape `ne` (ggml order, ne[0] contiguous; trailing
// 1s do not count as dimensions) in a file of type `ftype`:
//  - F32 for 1-D tensors, for names not ending in "weight", and for the small RWKV matrices
//    llama.cpp never quantises (time_mix w0/w1/w2, a0/a1/a2, v0/v1/v2, g1/g2, lerp_fused, ...);
//  - output.weight: Q6_K for quantised ftypes other than Q8_0 (Q8_0 if ne[0] does not fit the
//    base type's blocks), the base type for F16/BF16/Q8_0;
//  - every other matrix: the base type.
// If ne[0] is not a multiple of the chosen type's block, K-quants fall back as llama.cpp does
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and to F16 when that does not fit either. (For
// the legacy types llama.cpp gives up on such a tensor; we keep it in F16.)
GgmlType rwkv7_tensor_type(QuantFtype ftype, std::string_view name, std::span<const int64_t> ne);
GgmlType rwkv7_tensor_type(QuantFtype ftype, const GgufTensor& tensor);

}  // namespace rwkvd::engine
