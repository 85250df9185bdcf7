#pragma once
// CPU dequantisation of every ggml type rwkvd reads: the reference the GPU kernels are tested
// against, and what the CPU backend multiplies with.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/ggml_type.h"
#include "engine/quant/half.h"  // fp16_to_fp32, fp32_to_fp16, bf16_to_fp32, fp32_to_bf16

namespace rwkvd::engine {

// Converts `n` elements (a whole number of blocks of `type`) starting at `src` to float32.
// `src` needs no alignment. Throws EngineError if n is negative or not a whole number of blocks.
void dequantize(GgmlType type, const std::byte* src, float* dst, int64_t n);

// The same, converting all of `dst`; throws EngineError unless `src` holds exactly the bytes of
// dst.size() elements.
void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

}  // namespace rwkvd::engine
