// rwkvd: the worker and its tools in one binary.
#include <cstdio>
#include <exception>

#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"rwkvd: RWKV-7 inference service and tools"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "rwkvd 0.1.0");
  rwkvd::tools::add_inspect_command(app);
  rwkvd::tools::add_tokenize_command(app);
  rwkvd::tools::add_eval_command(app);
  rwkvd::tools::add_serve_command(app);
  rwkvd::tools::add_client_generate_command(app);
  rwkvd::tools::add_client_embed_command(app);
  rwkvd::tools::add_client_tokenize_command(app);
  rwkvd::tools::add_client_state_command(app);
  rwkvd::tools::add_client_stats_command(app);
  rwkvd::tools::add_bench_command(app);
  rwkvd::tools::add_quantize_command(app);
  rwkvd::tools::add_synth_command(app);
  rwkvd::tools::add_convert_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwkvd: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
