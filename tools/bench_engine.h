#pragma once
// The engine-level end-to-end figures of `rwkvd bench`: load, tokenize, prefill, generation,
// document state, field analysis, embedding throughput and a quality hash, on one backend.
#include "tools/bench_report.h"
#include "tools/bench_util.h"

namespace rwkvd::tools {

using EngineBenchOptions = BenchOptions;

void run_engine_bench(const BenchOptions& options, BenchReport& report);

}  // namespace rwkvd::tools
