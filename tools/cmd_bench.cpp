// `rwkvd bench`: the end-to-end figures for one model file, as JSON and a markdown table.
// Engine-level figures run one Backend in this process (tools/bench_engine.h); client-level
// figures start `rwkvd serve` from this binary and drive it with the C++ client
// (tools/bench_client.h).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>

#include "tools/bench_client.h"
#include "tools/bench_engine.h"
#include "tools/commands.h"

#ifndef RWKVD_SOURCE_DIR
#define RWKVD_SOURCE_DIR "."
#endif
#ifndef RWKVD_GIT_COMMIT
#define RWKVD_GIT_COMMIT "unknown"
#endif

namespace rwkvd::tools {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto out = std::make_shared<std::string>("bench-result.json");
  auto md = std::make_shared<std::string>();
  auto parts = std::make_shared<std::vector<std::string>>();
  o->text_path = std::string(RWKVD_SOURCE_DIR) + "/../shared/fixtures/tokenizer/bench_email.txt";
  o->fields_path = std::string(RWKVD_SOURCE_DIR) + "/bench/field_prompts.txt";
  auto* cmd =
      app.add_subcommand("bench", "End-to-end benchmark of a model: writes JSON + markdown");
  cmd->add_option("--model", o->model, "GGUF model")->required();
  cmd->add_option("--device", o->device, "cpu | gpu (the engine's and the worker's)")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option("--text", o->text_path, "the document to analyse")->capture_default_str();
  cmd->add_option("--fields", o->fields_path, "field prompts, one per line")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "repeats per figure")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick, "small sizes (CI smoke run)");
  cmd->add_option("--threads", o->threads, "cpu threads of the engine and the worker (0 = all)");
  cmd->add_option("--parts", *parts, "engine, client (default: both)")
      ->check(CLI::IsMember({"engine", "client"}))
      ->delimiter(',');
  cmd->add_option("--out", *out, "JSON result file")->capture_default_str();
  cmd->add_option("--markdown", *md, "also write a markdown table here");
  cmd->callback([o, out, md, parts] {
    if (!parts->empty()) {
      o->engine = std::find(parts->begin(), parts->end(), "engine") != parts->end();
      o->client = std::find(parts->begin(), parts->end(), "client") != parts->end();
    }
    BenchReport report;
    report.set_context("machine", machine_description());
    report.set_context("commit", RWKVD_GIT_COMMIT);
    report.set_context("date", utc_now());
    report.set_context("model", o->model);
    report.set_context("quick", o->quick);
    report.set_context("repeats", o->repeats);
    report.set_context("requested_device", o->device);
    // The engine part first: its backend is gone (memory and threads) before the worker starts.
    if (o->engine) run_engine_bench(*o, report);
    if (o->client) run_client_bench(*o, report);
    std::ofstream(*out) << report.to_json().dump(1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace)
                        << "\n";
    const std::string table = report.to_markdown();
    if (!md->empty()) std::ofstream(*md) << table;
    std::printf("%s\nwrote %s\n", table.c_str(), out->c_str());
  });
}

}  // namespace rwkvd::tools
