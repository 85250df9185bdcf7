#pragma once
// CPU dequantisation of every ggml type rwkvd reads: the reference the GPU kernels are tested
// against, and what the CPU backend multiplies with.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/ggml_type.h"

namespace rwkvd::engine {

// Converts `n` elements (a whole number of blocks of `type`) starting at `src` to float32.
// Throws EngineError if n is not a whole number of blocks.
void dequantize(GgmlType type, const std::byte* src, float* dst, int64_t n);

// float16 / bfloat16 <-> float32 conversions (round to nearest even).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace rwkvd::engine
