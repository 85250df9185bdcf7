// `rwkvd eval`: placeholder until the CPU forward lands.
#include <stdexcept>

#include "tools/commands.h"

namespace rwkvd::tools {
void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Run one sequence and write raw float32 outputs");
  cmd->allow_extras();
  cmd->callback([] { throw std::runtime_error("eval: not implemented yet"); });
}
}  // namespace rwkvd::tools
