// rwkvd: the worker and its tools in one binary.
#include <cstdio>
#include <exception>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "tools/commands.h"

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // States and inline tensors are tens of MB (2.9B: 21.6 MB). glibc serves such blocks with a
  // fresh mmap each time, and every page faults on first touch: a state sent inline passes
  // through three such blocks on each side (message, decoded value, parsed floats), and most of
  // the time is those faults (bench/shm_bench inline/encode_decode, 2 cores: 62 ms, 28 ms with
  // these settings). Blocks up to 32 MB, glibc's most, come from the heap instead, and freed
  // memory stays for reuse.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
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
  rwkvd::tools::add_http_command(app);
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
