#pragma once
// The CPU reference's building blocks, on row-major float32 activations [rows, width].
#include <cstdint>
#include <span>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/gguf.h"

namespace rwkvd::engine::cpu {

// A whole tensor widened to float32 (for the small per-channel vectors and LoRA matrices).
std::vector<float> to_f32(const GgufTensor& t);

// Row `row` of a 2-D weight (ne[0] elements) widened to float32.
void dequantize_row(const GgufTensor& t, int64_t row, float* out);

// y[t][o] = sum_i W[o][i] * x[t][i] for t < n_tok, with W in ggml layout ne = [in, out] of any
// supported type. Each weight row is dequantized once and reused for every token.
void matmul(ThreadPool& pool, const GgufTensor& w, const float* x, int64_t n_tok, float* y);

// LayerNorm of each row with weight and bias.
void layer_norm(const float* x, int64_t rows, int64_t width, const float* w, const float* b,
                float eps, float* out);

float sigmoid(float x);
float dot(const float* a, const float* b, int64_t n);

}  // namespace rwkvd::engine::cpu
