// `rwkvd state --text T --out FILE.f32`: the recurrent state after a prompt (docs/STATE_LAYOUT.md),
// computed by a running worker in a throwaway session.
#include <cstdio>

#include "tools/client_common.h"
#include "tools/commands.h"

namespace rwkvd::tools {

void add_client_state_command(CLI::App& app) {
  struct Args {
    ClientArgs c;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("state", "The state after a prompt, from a running worker");
  add_client_options(cmd, a->c, true);
  cmd->add_option("--out", a->out, "write raw float32 [n_layer, head_size+2, n_embd] here");
  cmd->callback([a] {
    auto c = a->c.connect();
    const uint64_t s = c->session_open();
    c->session_feed(s, a->c.input());
    {
      const client::Tensor t = c->session_state(s);
      std::fprintf(stderr, "state [%lld, %lld, %lld] (%s)\n", static_cast<long long>(t.shape[0]),
                   static_cast<long long>(t.shape[1]), static_cast<long long>(t.shape[2]),
                   t.in_shared_memory() ? "shared memory" : "inline");
      if (!a->out.empty()) write_f32(a->out, t.data());
    }
    c->session_close(s);
  });
}

}  // namespace rwkvd::tools
