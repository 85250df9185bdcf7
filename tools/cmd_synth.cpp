// `rwkvd synth`: writes a random-weight RWKV-7 GGUF of any size (tools/synth/), for tests,
// benchmarks and demos without a real checkpoint.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/error.h"
#include "tools/commands.h"
#include "tools/progress.h"
#include "tools/synth/synth.h"

namespace rwkvd::tools {
namespace {

struct SynthOptions {
  synth::SynthConfig cfg;
  std::string preset, type = "f32", out, vocab_file;
  bool quiet = false;
};

// Where the world vocab is when --vocab-file is not given: the fixtures of $RWKVD_FIXTURES,
// resolved at run time (the binary holds no path of the machine it was built on); empty if unset.
std::filesystem::path default_world_vocab() {
  const char* env = std::getenv("RWKVD_FIXTURES");
  if (env == nullptr || *env == '\0') return {};
  return std::filesystem::path(env) / "tokenizer" / "rwkv_vocab_v20230424.txt";
}

void run_synth(SynthOptions& o, const CLI::App& cmd) {
  synth::SynthConfig& c = o.cfg;
  if (!o.preset.empty()) {
    const auto p = synth::find_preset(o.preset);
    if (!p) throw engine::EngineError("synth: unknown preset '" + o.preset + "'");
    // Explicit flags win over the preset.
    if (cmd.count("--layers") == 0) c.layers = p->layers;
    if (cmd.count("--embd") == 0) c.embd = p->embd;
  } else if (cmd.count("--layers") == 0 || cmd.count("--embd") == 0) {
    throw engine::EngineError("synth: give --layers and --embd, or --preset");
  }
  const auto t = synth::parse_file_type(o.type);
  if (!t) throw engine::EngineError("synth: unknown --type '" + o.type + "'");
  c.type = *t;
  if (!o.vocab_file.empty()) {
    c.vocab_file = o.vocab_file;
  } else if (c.vocab >= 65536) {
    // A full-size vocab is the world vocab, when it can be found.
    const auto world = default_world_vocab();
    if (!world.empty() && std::filesystem::exists(world)) {
      c.vocab_file = world.string();
    } else if (!o.quiet) {
      std::fprintf(stderr,
                   "synth: no world vocab (%s); generating token strings (use --vocab-file)\n",
                   world.empty() ? "RWKVD_FIXTURES unset" : world.string().c_str());
    }
  }
  ProgressBar bar("synth", o.quiet);
  synth::synthesize(c, o.out, [&](uint64_t done, uint64_t total, std::string_view tensor) {
    bar.update(done, total, tensor);
  });
  if (!o.quiet) {
    std::fprintf(stderr, "synth: wrote %s (%u layers, D %u, vocab %u, %s%s, seed %llu)\n",
                 o.out.c_str(), c.layers, c.embd, c.vocab,
                 std::string(synth::file_type_name(c.type)).c_str(),
                 c.zeros ? ", zero weights" : "", static_cast<unsigned long long>(c.seed));
  }
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  auto* cmd = app.add_subcommand("synth", "Write a random-weight RWKV-7 GGUF (llama.cpp layout)");
  cmd->add_option("--preset", o->preset,
                  "0.1b (L12 D768), 0.4b (L24 D1024), 1.5b (L24 D2048), "
                  "2.9b (L32 D2560) or 7.2b (L32 D4096)")
      ->check(CLI::IsMember({"0.1b", "0.4b", "1.5b", "2.9b", "7.2b"}));
  cmd->add_option("--layers", o->cfg.layers, "Number of layers");
  cmd->add_option("--embd", o->cfg.embd, "Embedding size D");
  cmd->add_option("--vocab", o->cfg.vocab, "Vocabulary size (>= 65536: the world vocab)")
      ->capture_default_str();
  cmd->add_option("--ffn", o->cfg.ffn, "Feed-forward size (default 4 * D)");
  cmd->add_option("--head-size", o->cfg.head_size, "Head size N")->capture_default_str();
  cmd->add_option("--type", o->type, "f32, f16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k")
      ->capture_default_str();
  cmd->add_option("--seed", o->cfg.seed, "Random seed (the file depends only on it and the shape)")
      ->required();
  cmd->add_option("--out", o->out, "Output .gguf")->required();
  cmd->add_option("--vocab-file", o->vocab_file, "rwkv_vocab_v20230424.txt to take tokens from");
  cmd->add_option("--name", o->cfg.name, "general.name (default: from the shape and seed)");
  cmd->add_flag("--zeros", o->cfg.zeros,
                "Every weight zero, left as holes in the file: real shapes in a moment and no "
                "disk (for `rwkvd inspect --plan`; its outputs are meaningless)");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress on stderr");
  cmd->callback([o, cmd] { run_synth(*o, *cmd); });
}

}  // namespace rwkvd::tools
