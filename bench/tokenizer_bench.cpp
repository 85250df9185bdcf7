// World tokenizer speed on the fixtures' 3,329-byte email (docs/TOKENIZER.md has the figures).
//   build/bench/tokenizer_bench [--benchmark_repetitions=N]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "engine/tokenizer.h"

namespace {

std::filesystem::path fixture(const char* rel) {
  const char* env = std::getenv("RWKVD_FIXTURES");
  return std::filesystem::path(env != nullptr && *env != '\0' ? env : RWKVD_DEFAULT_FIXTURES) / rel;
}

const std::filesystem::path kVocab = fixture("tokenizer/rwkv_vocab_v20230424.txt");
const std::filesystem::path kEmail = fixture("tokenizer/bench_email.txt");

bool have_fixtures(benchmark::State& state) {
  if (std::filesystem::exists(kVocab) && std::filesystem::exists(kEmail)) return true;
  state.SkipWithError(("missing fixtures (set RWKVD_FIXTURES): " + kVocab.string()).c_str());
  return false;
}

const rwkvd::engine::WorldTokenizer& tokenizer() {
  static const auto tok = rwkvd::engine::WorldTokenizer::from_vocab_file(kVocab.string());
  return *tok;
}

const std::string& email() {
  static const std::string text = [] {
    std::ifstream in(kEmail, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  return text;
}

// One encode returning a fresh vector: what a request pays.
void BM_EncodeEmail(benchmark::State& state) {
  if (!have_fixtures(state)) return;
  const auto& tok = tokenizer();
  const std::string& text = email();
  for (auto _ : state) {
    auto ids = tok.encode(text);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tok.encode(text).size());
}
BENCHMARK(BM_EncodeEmail)->Unit(benchmark::kMicrosecond);

// The same into a reused buffer: the trie walk alone, no allocation.
void BM_EncodeEmailInto(benchmark::State& state) {
  if (!have_fixtures(state)) return;
  const auto& tok = tokenizer();
  const std::string& text = email();
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (auto _ : state) {
    ids.clear();
    tok.encode_into(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeEmailInto)->Unit(benchmark::kMicrosecond);

void BM_DecodeEmail(benchmark::State& state) {
  if (!have_fixtures(state)) return;
  const auto& tok = tokenizer();
  const auto ids = tok.encode(email());
  for (auto _ : state) {
    auto text = tok.decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * email().size()));
}
BENCHMARK(BM_DecodeEmail)->Unit(benchmark::kMicrosecond);

// Startup cost: parse the 1 MB vocab file and build the trie.
void BM_LoadVocabFile(benchmark::State& state) {
  if (!have_fixtures(state)) return;
  for (auto _ : state) {
    auto tok = rwkvd::engine::WorldTokenizer::from_vocab_file(kVocab.string());
    benchmark::DoNotOptimize(tok.get());
  }
}
BENCHMARK(BM_LoadVocabFile)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
