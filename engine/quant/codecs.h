#pragma once
// Per-type block codecs behind dequantize() and quantize(). Internal to engine/quant: callers
// have already checked the element count, so these take a number of whole blocks.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "engine/ggml_type.h"

namespace rwkvd::engine::quant {

// Number of blocks in `n` elements of `type`; throws EngineError (naming `what`) if n is
// negative or not a whole number of blocks.
inline int64_t whole_blocks(GgmlType type, int64_t n, const char* what) {
  const auto& t = ggml_traits(type);
  if (n < 0 || n % t.block_elems != 0) {
    throw EngineError(std::string(what) + ": " + std::to_string(n) + " elements of " +
                      std::string(t.name) + " is not a whole number of " +
                      std::to_string(t.block_elems) + "-element blocks");
  }
  return n / t.block_elems;
}

void dequantize_q4_0(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q4_1(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q5_0(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q5_1(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q8_0(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q4_k(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q5_k(const std::byte* src, float* dst, int64_t n_blocks);
void dequantize_q6_k(const std::byte* src, float* dst, int64_t n_blocks);

void quantize_q4_0(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q4_1(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q5_0(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q5_1(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q8_0(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q4_k(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q5_k(const float* src, std::byte* dst, int64_t n_blocks);
void quantize_q6_k(const float* src, std::byte* dst, int64_t n_blocks);

}  // namespace rwkvd::engine::quant
