#pragma once
// Each subcommand of `rwkvd` registers itself on the app; its file holds its options and body.
// A command's body throws on failure; main() prints the message and exits non-zero.
#include <CLI/CLI.hpp>

namespace rwkvd::tools {

void add_inspect_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_eval_command(CLI::App& app);
// The worker and its client commands (need rwkvd_worker / rwkvd_client).
void add_serve_command(CLI::App& app);
void add_client_generate_command(CLI::App& app);
void add_client_embed_command(CLI::App& app);
void add_client_tokenize_command(CLI::App& app);
void add_client_state_command(CLI::App& app);
void add_client_stats_command(CLI::App& app);
// The OpenAI-compatible HTTP front (needs rwkvd_http).
void add_http_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_convert_command(CLI::App& app);

}  // namespace rwkvd::tools
