// `rwkvd tokenize-remote --text T` (or --tokens 1,2 --decode): the worker's tokenizer. The local
// one is `rwkvd tokenize`.
#include <cstdio>

#include "tools/client_common.h"
#include "tools/commands.h"

namespace rwkvd::tools {

void add_client_tokenize_command(CLI::App& app) {
  struct Args {
    ClientArgs c;
    bool decode = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("tokenize-remote", "Tokenize (or --decode) with a running worker");
  add_client_options(cmd, a->c, true);
  cmd->add_flag("--decode", a->decode, "decode --tokens to text");
  cmd->callback([a] {
    auto c = a->c.connect();
    if (a->decode) {
      const std::string s = c->detokenize(parse_token_list(a->c.tokens));
      std::fwrite(s.data(), 1, s.size(), stdout);
      return;
    }
    std::printf("%s\n", nlohmann::json(c->tokenize(a->c.text)).dump().c_str());
  });
}

}  // namespace rwkvd::tools
