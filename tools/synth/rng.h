#pragma once
// A counter-based random source: element i of a tensor is a pure function of (seed, tensor
// name, i). Tensors can therefore be generated in any order and any chunking, and a synthetic
// model is reproducible from its seed alone, on any machine (integer hashing only, no libm).
#include <cstdint>
#include <string_view>

namespace rwkvd::tools::synth {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

class TensorRng {
 public:
  TensorRng(uint64_t seed, std::string_view stream)
      : key_(splitmix64(seed ^ splitmix64(fnv1a64(stream)))) {}

  uint64_t bits(uint64_t i) const { return splitmix64(splitmix64(i) ^ key_); }

  // Uniform in [0, 1), 24 bits: exactly representable as a float.
  float uniform(uint64_t i) const {
    return static_cast<float>(bits(i) >> 40) * (1.0f / 16777216.0f);
  }

  // Approximately N(0, 1): Irwin-Hall sum of four 16-bit uniforms, rescaled. Its tails stop at
  // ±3.46, which suits random weights (no rare huge value to blow up an activation).
  float normal(uint64_t i) const {
    const uint64_t b = bits(i);
    const uint32_t sum = static_cast<uint32_t>((b & 0xffff) + ((b >> 16) & 0xffff) +
                                               ((b >> 32) & 0xffff) + (b >> 48));
    // Each term is uniform on [0, 65535]: mean 2 * 65535, variance 4 * (65536^2 - 1) / 12.
    constexpr float kMean = 2.0f * 65535.0f;
    constexpr float kInvStd = 1.0f / 37837.23f;  // 1 / sqrt((65536^2 - 1) / 3)
    return (static_cast<float>(sum) - kMean) * kInvStd;
  }

 private:
  uint64_t key_;
};

}  // namespace rwkvd::tools::synth
