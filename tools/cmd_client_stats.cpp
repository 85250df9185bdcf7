// `rwkvd stats [--info]`: a running worker's counters (or its info) as JSON.
#include <cstdio>

#include "tools/client_common.h"
#include "tools/commands.h"

namespace rwkvd::tools {

void add_client_stats_command(CLI::App& app) {
  struct Args {
    ClientArgs c;
    bool info = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("stats", "Print a running worker's stats (or --info) as JSON");
  add_client_options(cmd, a->c, false);
  cmd->add_flag("--info", a->info, "model, device, memory and limits instead");
  cmd->callback([a] {
    auto c = a->c.connect();
    const auto v = a->info ? c->info() : c->stats();
    std::printf("%s\n",
                to_json(v).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  });
}

}  // namespace rwkvd::tools
