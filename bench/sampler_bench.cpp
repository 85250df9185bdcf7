// Host time to pick one token from a row of 65536 logits (the world vocabulary), per sampling
// setting: the worker does this for every sequence of every decode step, on its engine thread.
//
//   sampler_bench [--benchmark_filter=REGEX]
//
// Logits are N(0, 3), about a random-weight model's spread.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

using rwkvd::engine::Sampler;
using rwkvd::engine::SamplingParams;

void BM_Sample(benchmark::State& state) {
  std::vector<float> logits(65536);
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.f, 3.f);
  for (auto& x : logits) x = d(g);
  SamplingParams p;
  p.temperature = static_cast<float>(state.range(0)) / 10.f;
  p.top_k = static_cast<uint32_t>(state.range(1));
  p.top_p = static_cast<float>(state.range(2)) / 100.f;
  p.seed = 1;
  Sampler s(p);
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits));
}
// temperature x 10, top_k (0: all), top_p x 100: greedy, the protocol's default (1, all, 1),
// top-k 40, nucleus 0.9 at temperature 0.8.
BENCHMARK(BM_Sample)
    ->ArgNames({"temp10", "top_k", "top_p100"})
    ->Args({0, 0, 100})
    ->Args({10, 0, 100})
    ->Args({10, 40, 100})
    ->Args({8, 0, 90})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
