#pragma once
// Small helpers shared by the engine-level and client-level parts of `rwkvd bench`.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rwkvd::tools {

struct BenchOptions {
  std::string model;
  std::string device = "gpu";
  std::string text_path;    // the document (bench_email.txt of the fixtures)
  std::string fields_path;  // field prompts, one per line; empty: kFieldPrompts
  int repeats = 3;
  bool quick = false;     // small sizes for a CI smoke run
  int embed_docs = 1024;  // documents of 200 tokens for the embedding throughput figures
  uint32_t threads = 0;   // cpu threads of the engine and of the worker (0 = all cores)
  bool engine = true;     // the engine-level figures (one Backend in this process)
  bool client = true;     // the client-level figures (a worker process and C++ clients)
};

namespace bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A stderr line as each part of the benchmark starts, with the seconds since the first: a long
// run's log shows where it is, and one cut short where it stopped.
inline void phase(const std::string& what) {
  static const Clock::time_point t0 = Clock::now();
  std::fprintf(stderr, "bench: %7.1f s  %s\n", ms_since(t0) / 1000.0, what.c_str());
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("bench: cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The non-empty lines of a file (the field prompts).
inline std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream lines(read_file(path));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(line);
  }
  if (out.empty()) throw std::runtime_error("bench: no lines in " + path);
  return out;
}

// The fields the field-analysis figures ask of the document, one generation each.
inline const std::vector<std::string> kFieldPrompts = {
    "Sender:", "Date:", "Intent:", "Requested action:", "Deadline:", "Sentiment:"};

// The field prompts: --fields FILE's lines, else kFieldPrompts.
inline std::vector<std::string> field_prompts(const BenchOptions& o) {
  return o.fields_path.empty() ? kFieldPrompts : read_lines(o.fields_path);
}

// Deterministic token ids in [1, vocab): stand-ins for documents of a given length.
inline std::vector<int32_t> pseudo_tokens(size_t n, uint32_t vocab, uint64_t seed) {
  std::vector<int32_t> t(n);
  for (auto& v : t) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<int32_t>(1 + (seed >> 33) % (vocab - 1));
  }
  return t;
}

// The document of the doc-state figures; --quick keeps its first lines up to 256 bytes.
inline std::string document(const BenchOptions& o) {
  std::string text = read_file(o.text_path);
  constexpr size_t kQuickBytes = 256;
  if (o.quick && text.size() > kQuickBytes) {
    const size_t cut = text.rfind('\n', kQuickBytes);
    text.resize(cut == std::string::npos || cut == 0 ? kQuickBytes : cut + 1);
  }
  return text;
}

// Sizes shared by both parts, so engine and client figures measure the same work.
struct Sizes {
  size_t n_docs;                 // embedding throughput: documents...
  size_t doc_len;                // ... of this many tokens
  int field_tokens = 8;          // tokens generated per field prompt
  const char* field_end = "\n";  // embedded after a field's answer
  explicit Sizes(const BenchOptions& o)
      : n_docs(o.quick ? 16 : static_cast<size_t>(o.embed_docs)), doc_len(o.quick ? 64 : 200) {}
};

}  // namespace bench
}  // namespace rwkvd::tools
