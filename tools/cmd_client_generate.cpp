// `rwkvd generate --text T`: generate through a running worker, streaming text to stdout.
#include <cstdio>

#include "tools/client_common.h"
#include "tools/commands.h"

namespace rwkvd::tools {

void add_client_generate_command(CLI::App& app) {
  struct Args {
    ClientArgs c;
    protocol::Sampling s;
    uint64_t seed = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("generate", "Generate text through a running worker");
  add_client_options(cmd, a->c, true);
  cmd->add_option("--max-tokens", a->s.max_tokens)->capture_default_str();
  cmd->add_option("--temperature", a->s.temperature)->capture_default_str();
  cmd->add_option("--top-p", a->s.top_p)->capture_default_str();
  cmd->add_option("--top-k", a->s.top_k)->capture_default_str();
  cmd->add_option("--presence-penalty", a->s.presence_penalty);
  cmd->add_option("--frequency-penalty", a->s.frequency_penalty);
  cmd->add_option("--stop", a->s.stop, "stop string (repeatable)");
  auto* seed = cmd->add_option("--seed", a->seed);
  cmd->add_flag("--json", a->json, "print the whole result as JSON instead of streaming text");
  cmd->callback([a, seed] {
    auto c = a->c.connect();
    client::GenerateOptions o;
    o.sampling = a->s;
    if (seed->count() > 0) o.sampling.seed = a->seed;
    if (a->json) {
      const auto g = c->generate(a->c.input(), o);
      nlohmann::json j{{"tokens", g.tokens},
                       {"text", g.text},
                       {"finish_reason", g.finish_reason},
                       {"seed", g.seed},
                       {"prompt_tokens", g.prompt_tokens},
                       {"completion_tokens", g.completion_tokens}};
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return;
    }
    const auto g = c->generate(a->c.input(), o, [](const client::Chunk& ch) {
      std::fwrite(ch.text.data(), 1, ch.text.size(), stdout);
      std::fflush(stdout);
    });
    std::fwrite(g.text.data(), 1, g.text.size(), stdout);
    std::fprintf(stdout, "\n");
    std::fprintf(stderr, "[%s, %llu tokens, seed %llu]\n", g.finish_reason.c_str(),
                 static_cast<unsigned long long>(g.completion_tokens),
                 static_cast<unsigned long long>(g.seed));
  });
}

}  // namespace rwkvd::tools
