#pragma once
// Quantisation of float32 weights to the ggml types rwkvd writes, producing the exact block
// layouts llama.cpp reads. The K-quant and legacy quantisers search their scales for the least
// squared error (see scale_search.h and quantize_k.cpp); docs/QUANTIZATION.md compares their
// error with llama.cpp's. Blocks are independent, so callers may split a tensor across threads
// at block boundaries.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/ggml_type.h"

namespace rwkvd::engine {

// Writes the `n` elements at `src` (a whole number of blocks of `type`) as `type` to `dst`,
// which must have room for ggml_row_bytes(type, n) bytes and needs no alignment. Values must be
// finite. Every type of ggml_type.h is supported: F32, F16 and BF16 are converted with
// round-to-nearest-even. Throws EngineError if n is negative or not a whole number of blocks.
void quantize(GgmlType type, const float* src, std::byte* dst, int64_t n);

// The same for all of `src`; throws EngineError unless `dst` is exactly the size of the result.
void quantize(GgmlType type, std::span<const float> src, std::span<std::byte> dst);

}  // namespace rwkvd::engine
