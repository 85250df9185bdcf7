// `rwkvd quantize IN.gguf OUT.gguf TYPE`: requantize an RWKV-7 model (docs/QUANTIZATION.md).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "engine/error.h"
#include "tools/commands.h"
#include "tools/progress.h"
#include "tools/quantize/requantize.h"

namespace rwkvd::tools {
namespace {

struct QuantizeOptions {
  std::string in, out, type;
  bool quiet = false;
};

void run_quantize(const QuantizeOptions& o) {
  const auto ftype = engine::parse_quant_ftype(o.type);
  if (!ftype) {
    throw engine::EngineError("quantize: unknown type '" + o.type +
                              "' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, "
                              "q6_k)");
  }
  ProgressBar bar("quantize", o.quiet);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = quantize::requantize(o.in, o.out, *ftype,
                                      [&](uint64_t done, uint64_t total, std::string_view t) {
                                        bar.update(done, total, t);
                                      });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.quiet) return;
  std::string mix;
  for (const auto& [type, n] : r.tensors_per_type) mix += " " + type + ":" + std::to_string(n);
  std::fprintf(stderr, "quantize: wrote %s as %s in %.1f s (%.1f MB -> %.1f MB; tensors%s)\n",
               o.out.c_str(), std::string(engine::quant_ftype_name(*ftype)).c_str(), s,
               static_cast<double>(r.in_bytes) / 1e6, static_cast<double>(r.out_bytes) / 1e6,
               mix.c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* cmd = app.add_subcommand("quantize", "Requantize an RWKV-7 GGUF (llama.cpp's type policy)");
  cmd->add_option("in", o->in, "Input .gguf")->required();
  cmd->add_option("out", o->out, "Output .gguf")->required();
  cmd->add_option("type", o->type, "q4_k_m, q5_k_m, q6_k, q8_0, q4_0, q4_1, q5_0, q5_1, f16, ...")
      ->required();
  cmd->add_flag("--quiet,-q", o->quiet, "No progress on stderr");
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace rwkvd::tools
