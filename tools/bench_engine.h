#pragma once
// The engine-level end-to-end figures of `rwkvd bench`: load, tokenize, prefill, generation,
// document state, field analysis, embedding throughput and a quality hash, on one backend.
#include <string>

#include "tools/bench_report.h"

namespace rwkvd::tools {

struct EngineBenchOptions {
  std::string model;
  std::string device = "gpu";
  std::string text_path;  // the document (bench_email.txt)
  std::string fields_path;  // field prompts, one per line (bench/field_prompts.txt)
  int repeats = 3;
  bool quick = false;  // small sizes for a CI smoke run
};

void run_engine_bench(const EngineBenchOptions& options, BenchReport& report);

}  // namespace rwkvd::tools
