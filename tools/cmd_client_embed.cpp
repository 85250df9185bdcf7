// `rwkvd embed --text T [--text U ...]`: embeddings from a running worker, as JSON or raw f32.
#include <cstdio>

#include "tools/client_common.h"
#include "tools/commands.h"

namespace rwkvd::tools {

void add_client_embed_command(CLI::App& app) {
  struct Args {
    ClientArgs c;
    std::vector<std::string> texts;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("embed", "Embed texts (or --tokens) through a running worker");
  add_client_options(cmd, a->c, false);
  cmd->add_option("--text", a->texts, "input text (repeatable)");
  cmd->add_option("--tokens", a->c.tokens, "one input as comma-separated token ids");
  cmd->add_option("--out", a->out, "write raw float32 [n, n_embd] here instead of JSON");
  cmd->callback([a] {
    std::vector<protocol::Input> inputs;
    for (const auto& t : a->texts) inputs.push_back(protocol::Input{t, {}});
    if (!a->c.tokens.empty()) inputs.push_back(a->c.input());
    if (inputs.empty()) throw std::runtime_error("embed: give --text or --tokens");
    auto c = a->c.connect();
    const client::Tensor t = c->embed(inputs);
    if (!a->out.empty()) {
      write_f32(a->out, t.data());
      std::fprintf(stderr, "wrote [%lld, %lld] float32 to %s\n", static_cast<long long>(t.shape[0]),
                   static_cast<long long>(t.shape[1]), a->out.c_str());
      return;
    }
    nlohmann::json rows = nlohmann::json::array();
    const size_t d = static_cast<size_t>(t.shape[1]);
    for (int64_t i = 0; i < t.shape[0]; ++i) {
      auto row = t.data().subspan(static_cast<size_t>(i) * d, d);
      rows.push_back(std::vector<float>(row.begin(), row.end()));
    }
    std::printf("%s\n", rows.dump().c_str());
  });
}

}  // namespace rwkvd::tools
