// `rwkvd tokenize`: placeholder until the tokenizer slice lands.
#include <stdexcept>

#include "tools/commands.h"

namespace rwkvd::tools {
void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Encode text to token ids (or --decode)");
  cmd->allow_extras();
  cmd->callback([] { throw std::runtime_error("tokenize: not implemented yet"); });
}
}  // namespace rwkvd::tools
