#pragma once
// Converts generated float32 values to a tensor's ggml type, a whole number of rows at a time.
#include <cstddef>
#include <cstdint>

#include "engine/ggml_type.h"

namespace rwkvd::tools::synth {

// Writes the encoding of `n` floats (a whole number of blocks of `type`) to `dst`, which holds
// ggml_row_bytes(type, n) bytes: engine::quantize, split over threads for the slow types.
void encode(engine::GgmlType type, const float* src, std::byte* dst, int64_t n);

}  // namespace rwkvd::tools::synth
