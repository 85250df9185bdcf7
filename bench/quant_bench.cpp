// Dequantisation of every weight type (engine/quant/dequant.h) and the CPU backend's matmul
// (engine/cpu/ops.h), on random weights quantised with engine::quantize.
//   build/bench/quant_bench [--benchmark_filter=dequantize] [--benchmark_repetitions=N]
// dequantize/<type>: 256K elements (1 MiB of float32 out, cache resident), bytes/s = bytes READ.
// matmul/<type>/tokens:N: y = W x for a 2048 x 2048 weight (the 1.5B model's width) and N tokens,
// on all cores (the CPU backend's thread pool), items/s = weight elements times tokens.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cpu/thread_pool.h"
#include "engine/ggml_type.h"
#include "engine/quant/dequant.h"
#include "engine/quant/quantize.h"

namespace {

using rwkvd::engine::GgmlType;

constexpr GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                  GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
// The types the shipped models use (F16 and the K-quant mixes) and the plain ones.
constexpr GgmlType kMatmulTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::Q8_0,
                                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Weight-like values: roughly normal, sd 0.02, a few larger ones.
std::vector<float> random_weights(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    float s = 0;
    for (int k = 0; k < 4; ++k) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      s += static_cast<float>(seed >> 40) / static_cast<float>(1u << 24) - 0.5f;
    }
    x = 0.035f * s;
  }
  return v;
}

std::vector<std::byte> quantized(GgmlType type, const std::vector<float>& x) {
  std::vector<std::byte> out(*rwkvd::engine::ggml_row_bytes(type, x.size()));
  rwkvd::engine::quantize(type, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::string type_name(GgmlType t) {
  return std::string(rwkvd::engine::ggml_traits(t).name);
}

void BM_Dequantize(benchmark::State& state, GgmlType type) {
  constexpr int64_t n = 1 << 18;
  const auto q = quantized(type, random_weights(n, 1));
  std::vector<float> out(n);
  for (auto _ : state) {
    rwkvd::engine::dequantize(type, q.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(q.size()));
}

rwkvd::engine::cpu::ThreadPool& pool() {
  static rwkvd::engine::cpu::ThreadPool p(0);
  return p;
}

void BM_Matmul(benchmark::State& state, GgmlType type) {
  constexpr int64_t in = 2048, out = 2048;
  const int64_t n_tok = state.range(0);
  const auto q = quantized(type, random_weights(in * out, 2));
  rwkvd::engine::GgufTensor w;
  w.name = "bench.weight";
  w.type = type;
  w.n_dims = 2;
  w.ne = {in, out, 1, 1};
  w.n_bytes = q.size();
  w.data = q;
  const auto x = random_weights(static_cast<size_t>(in * n_tok), 3);
  std::vector<float> y(static_cast<size_t>(out * n_tok));
  for (auto _ : state) {
    rwkvd::engine::cpu::matmul(pool(), w, x.data(), n_tok, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * in * out * n_tok);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(q.size()));
  state.counters["threads"] = pool().size();
}

const int kRegistered = [] {
  for (GgmlType t : kAllTypes) {
    benchmark::RegisterBenchmark(("dequantize/" + type_name(t)).c_str(), BM_Dequantize, t)
        ->Unit(benchmark::kMicrosecond);
  }
  for (GgmlType t : kMatmulTypes) {
    benchmark::RegisterBenchmark(("matmul/" + type_name(t)).c_str(), BM_Matmul, t)
        ->ArgName("tokens")
        ->Arg(1)
        ->Arg(16)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
