#pragma once
// How a weight matrix's rows lie in device memory. Every type keeps its GGUF bytes except Q6_K,
// whose 210-byte blocks are only 2-byte aligned, so a shader read a piece of them with 20 word
// loads. On the device a Q6_K row is groups of up to 8 blocks: the group's 8 f16 d first (one
// 16-byte word, zeros past the row's last block), then each block's first 208 bytes (ql, qh,
// scales; 13 16-byte words). Every field then loads with aligned 16-byte or 4-byte words, and
// the row takes the same bytes, plus 16 for a last partial group and 16 of zeros where that
// makes an odd number of 16-byte words (quant.glsl's q6_block() and q6_d_byte() read it).
#include <cstddef>
#include <cstdint>

#include "engine/ggml_type.h"

namespace rwkvd::engine::vk {

// Bytes of one row of K elements of type t on the device (a multiple of 16 for Q6_K).
uint64_t device_row_bytes(GgmlType t, uint64_t K);

// Whether rows of type t differ on the device from their GGUF bytes.
bool rewrites_rows(GgmlType t);

// Rows [0, rows) of K elements from their GGUF bytes at src into their device form at dst
// (device_row_bytes() each; a plain copy where the type keeps its bytes).
void to_device_rows(GgmlType t, uint64_t K, const std::byte* src, std::byte* dst, uint64_t rows);

}  // namespace rwkvd::engine::vk
