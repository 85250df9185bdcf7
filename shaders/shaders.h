#pragma once
// The compute shaders as SPIR-V words, embedded at build time (see CMakeLists.txt here).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rwkvd::shaders {

struct Shader {
  std::string_view name;  // e.g. "mm_q4_k", "mm_q4_k_sg", "embed_f16", "wkv"
  std::span<const uint32_t> words;
};

const std::vector<Shader>& all();  // the product's (rwkvd_shaders)
// Benchmarks' own builds (rwkvd_bench_shaders, linked only by bench/): diagnostic variants whose
// results are wrong, and kernels the product never runs.
const std::vector<Shader>& bench_only();
// Tests' own builds (rwkvd_test_shaders, tests/vk/shaders/, linked only by vk_tests): probes of
// device features no kernel of the product uses yet.
const std::vector<Shader>& test_only();
// The named shader of all(); throws std::out_of_range naming it if absent.
std::span<const uint32_t> find(std::string_view name);

}  // namespace rwkvd::shaders
