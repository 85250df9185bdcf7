#pragma once
// What a backend's forward must achieve against the fixtures (fixtures/rwkv7/README.md), shared
// by the CPU and Vulkan tests, and the prompts they feed it.
#include <cstdint>
#include <ostream>
#include <vector>

#include "tests/support/compare.h"

namespace rwkvd::test {

// Bounds for one synthetic-A variant against llama.cpp's output for the same file.
struct VariantBounds {
  const char* name;
  double logits_max, logits_mean, embd_max, embd_mean, min_pearson;
};
void PrintTo(const VariantBounds& v, std::ostream* os);  // gtest's name for a parameter

// Every synthetic-A variant. f32 and f16 hold exact weights (F16 widens exactly), so only the
// order of float additions differs from llama.cpp: they get the backend's own `exact_max` and
// `exact_mean`. The quantized ones: llama.cpp quantizes activations to Q8 where it multiplies
// by quantized weights and we keep them float32, so its bits are not ours. Our difference from
// llama.cpp for a variant must stay below that variant's own difference from F32 (the README's
// table; embeddings from manifest.json), and every position must correlate at least as well as
// the README's lowest per-position correlation of the variant with F32.
std::vector<VariantBounds> synthetic_a_bounds(double exact_max, double exact_mean);

// Checks logits and embeddings of a variant against its bounds (gtest EXPECTs).
void expect_within(const VariantBounds& v, const DiffStats& logits, const DiffStats& embd);

// The tiny model's 198-byte prompt as token ids (its vocab is the 256 bytes).
std::vector<int32_t> text200_tokens();

// `n` pseudo-random token ids below `vocab`, the same on every run.
std::vector<int32_t> long_prompt(size_t n, uint32_t vocab);

}  // namespace rwkvd::test
