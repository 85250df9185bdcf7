// `rwkvd eval`: runs one sequence from a zero state and writes raw little-endian float32
// (positions x width, row-major; for --what state, the documented state layout).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend.h"
#include "tools/commands.h"
#include "tools/device.h"

namespace rwkvd::tools {
namespace {

struct EvalOptions {
  std::string model, tokens, tokens_file, what = "logits", positions = "last", device = "cpu", out;
  uint32_t chunk = 256;
};

std::vector<int32_t> parse_tokens(const EvalOptions& o) {
  std::vector<int32_t> ids;
  if (!o.tokens_file.empty()) {
    std::ifstream in(o.tokens_file);
    if (!in) throw std::runtime_error("cannot open tokens file " + o.tokens_file);
    for (const auto& v : nlohmann::json::parse(in)) ids.push_back(v.get<int32_t>());
    return ids;
  }
  std::stringstream ss(o.tokens);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    const long v = std::stol(item, &used);
    if (used != item.size()) throw std::runtime_error("bad token id '" + item + "'");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

void run_eval(const EvalOptions& o) {
  const std::vector<int32_t> ids = parse_tokens(o);
  if (ids.empty()) throw std::runtime_error("no tokens given");
  engine::BackendOptions bo;
  bo.n_slots = 1;
  bo.max_chunk = o.chunk;
  auto backend = open_backend(o.model, o.device, bo);
  const auto& hp = backend->hparams();

  engine::OutputMode mode = engine::OutputMode::kNone;
  const bool all = o.positions == "all";
  if (o.what == "logits")
    mode = all ? engine::OutputMode::kAllLogits : engine::OutputMode::kLastLogits;
  if (o.what == "embeddings") {
    mode = all ? engine::OutputMode::kAllEmbeddings : engine::OutputMode::kLastEmbedding;
  }
  const engine::SequenceInput in{0, ids, mode};
  std::vector<engine::Tensor> result = backend->run({&in, 1});
  std::vector<float> data;
  if (o.what == "state") {
    data.resize(hp.state_floats());
    backend->read_state(0, data);
  } else {
    data = std::move(result[0].data);
  }
  std::ofstream out(o.out, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + o.out);
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) throw std::runtime_error("error writing " + o.out);
  std::fprintf(stderr, "eval: %zu tokens on %s -> %s (%zu floats)\n", ids.size(),
               backend->device_name().c_str(), o.out.c_str(), data.size());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd = app.add_subcommand("eval", "Run one sequence from a zero state; write raw float32");
  cmd->add_option("--model", o->model, "GGUF model")->required();
  auto* tok = cmd->add_option("--tokens", o->tokens, "comma-separated token ids");
  auto* file = cmd->add_option("--tokens-file", o->tokens_file, "JSON array of token ids");
  tok->excludes(file);
  cmd->add_option("--what", o->what, "logits | embeddings | state")
      ->check(CLI::IsMember({"logits", "embeddings", "state"}));
  cmd->add_option("--positions", o->positions, "last | all")->check(CLI::IsMember({"last", "all"}));
  cmd->add_option("--chunk", o->chunk, "tokens per forward chunk")->check(CLI::Range(1u, 65536u));
  cmd->add_option("--device", o->device, "cpu | gpu")->check(CLI::IsMember({"cpu", "gpu"}));
  cmd->add_option("--out", o->out, "output file (raw float32)")->required();
  cmd->callback([o] {
    if (o->tokens.empty() && o->tokens_file.empty()) {
      throw std::runtime_error("eval: give --tokens or --tokens-file");
    }
    run_eval(*o);
  });
}

}  // namespace rwkvd::tools
