// `rwkvd bench`: the end-to-end figures for one model file, as JSON and a markdown table.
#include <cstdio>
#include <fstream>
#include <memory>

#include "tools/bench_engine.h"
#include "tools/commands.h"

#ifndef RWKVD_SOURCE_DIR
#define RWKVD_SOURCE_DIR "."
#endif
#ifndef RWKVD_GIT_COMMIT
#define RWKVD_GIT_COMMIT "unknown"
#endif

namespace rwkvd::tools {

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<EngineBenchOptions>();
  auto out = std::make_shared<std::string>("bench-result.json");
  auto md = std::make_shared<std::string>();
  o->text_path = std::string(RWKVD_SOURCE_DIR) + "/../shared/fixtures/tokenizer/bench_email.txt";
  o->fields_path = std::string(RWKVD_SOURCE_DIR) + "/bench/field_prompts.txt";
  auto* cmd = app.add_subcommand("bench", "End-to-end benchmark of a model: writes JSON + markdown");
  cmd->add_option("--model", o->model, "GGUF model")->required();
  cmd->add_option("--device", o->device, "cpu | gpu")->check(CLI::IsMember({"cpu", "gpu"}));
  cmd->add_option("--text", o->text_path, "the document to analyse")->capture_default_str();
  cmd->add_option("--fields", o->fields_path, "field prompts, one per line")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "repeats per figure")->check(CLI::Range(1, 100));
  cmd->add_flag("--quick", o->quick, "small sizes (CI smoke run)");
  cmd->add_option("--out", *out, "JSON result file")->capture_default_str();
  cmd->add_option("--markdown", *md, "also write a markdown table here");
  cmd->callback([o, out, md] {
    BenchReport report;
    report.set_context("machine", machine_description());
    report.set_context("commit", RWKVD_GIT_COMMIT);
    report.set_context("model", o->model);
    report.set_context("quick", o->quick);
    run_engine_bench(*o, report);
    std::ofstream(*out) << report.to_json().dump(1) << "\n";
    const std::string table = report.to_markdown();
    if (!md->empty()) std::ofstream(*md) << table;
    std::printf("%s\nwrote %s\n", table.c_str(), out->c_str());
  });
}

}  // namespace rwkvd::tools
