// `rwkvd serve --model FILE.gguf`: the worker. Loads the model (progress on stderr), then serves
// the protocol of protocol/PROTOCOL.md on a ZeroMQ ROUTER socket until SIGINT/SIGTERM.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "engine/gguf.h"
#include "tools/commands.h"
#include "tools/device.h"
#include "tools/model_summary.h"
#include "worker/server.h"
#include "worker/world_codec.h"

namespace rwkvd::tools {
namespace {

struct ServeArgs {
  std::string model;
  std::string device = "auto";
  std::string log_level = "info";
  uint32_t slots = 0;  // 0: the backend's choice (BackendOptions::n_slots)
  uint32_t max_chunk = 1024;
  uint32_t threads = 0;
  uint64_t prefix_cache_mb = 64;
  uint64_t shm_mb = 256;
  bool no_coalesce = false;
  worker::ServeOptions opt;
};

std::atomic<worker::Server*> g_server{nullptr};

// With --drain-s the first signal drains (the second stops at once); atomic stores: signal-safe.
extern "C" void on_signal(int) {
  if (auto* s = g_server.load()) s->request_drain();
}

// Loading can take a while on big models; say so once a second on stderr. The ticker waits on
// a condition variable, so the end of loading is not held up (a 100 ms sleep loop here used to
// add up to 100 ms to every start).
template <typename F>
auto with_progress(const std::string& what, F&& fn) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread ticker([&] {
    std::unique_lock lock(mu);
    for (int n = 1; !cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; }); ++n) {
      std::fprintf(stderr, "rwkvd: %s... %d s\n", what.c_str(), n);
    }
  });
  auto finish = [&] {
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
    ticker.join();
  };
  try {
    auto r = fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    finish();
    std::fprintf(stderr, "rwkvd: %s: done in %.2f s\n", what.c_str(), s);
    return r;
  } catch (...) {
    finish();
    throw;
  }
}

double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void run_serve(ServeArgs& a) {
  const auto start = std::chrono::steady_clock::now();
  auto logger = spdlog::stderr_color_mt("rwkvd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(a.log_level));
  a.opt.prefix_cache_bytes = a.prefix_cache_mb << 20;
  a.opt.shm_bytes = a.shm_mb << 20;
  a.opt.coalesce_embeds = !a.no_coalesce;
  const uint64_t file_bytes = std::filesystem::file_size(a.model);
  std::fprintf(stderr, "rwkvd: loading %s (%.1f MiB)\n", a.model.c_str(),
               static_cast<double>(file_bytes) / (1 << 20));
  engine::BackendOptions bo;
  bo.n_slots = a.slots;
  bo.n_threads = a.threads;
  bo.max_chunk = a.max_chunk;
  // The GPU device (instance and driver: ~150 ms on an H100), the tokenizer's tables (tens of
  // ms; they need only the file) and the shared-memory ring (~100 ms for 256 MiB) are made on
  // threads of their own, beside each other and the model's loading, not one after another.
  auto gpu = std::async(std::launch::async, [&] { return choose_device(a.device); });
  std::string types;
  auto codec = std::async(std::launch::async, [&] {
    const auto gguf = engine::GgufFile::open(a.model);
    types = weight_types(*gguf);
    return worker::make_world_codec(*gguf);
  });
  auto ring = std::async(std::launch::async, [&] { return worker::Server::make_ring(a.opt); });
  auto backend = with_progress("loading the model", [&] {
    DeviceChoice d = gpu.get();
    std::fprintf(stderr, "rwkvd: device %s (%s)\n", d.device.c_str(), d.why.c_str());
    return open_backend(a.model, d.device, bo, std::move(d.gpu));
  });
  const auto loaded = std::chrono::steady_clock::now();
  const std::string name = std::filesystem::path(a.model).stem().string();
  const engine::Rwkv7Hparams hp = backend->hparams();
  const std::string device_name = backend->device_name();
  auto made_codec = codec.get();  // after it, `types` is set
  worker::Server server(std::move(backend), std::move(made_codec), a.opt,
                        worker::ModelInfo{name, a.model, file_bytes});
  server.bind(ring.get());
  g_server = &server;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const auto ready = std::chrono::steady_clock::now();
  std::fprintf(stderr,
               "rwkvd: ready on %s in %.0f ms (the model %.0f, then the server %.0f): %s, "
               "RWKV-7 %u layers, n_embd %u, head_size %u, n_vocab %u, weights %s, on %s\n",
               server.endpoint().c_str(), ms_between(start, ready), ms_between(start, loaded),
               ms_between(loaded, ready), name.c_str(), hp.n_layer, hp.n_embd, hp.head_size,
               hp.n_vocab, types.c_str(), device_name.c_str());
  server.run();
  g_server = nullptr;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Serve a model to local clients over ZeroMQ");
  cmd->add_option("--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--endpoint", a->opt.endpoint,
                  "ipc://PATH or tcp://127.0.0.1:PORT (default: per-user ipc socket)");
  cmd->add_flag("--allow-remote", a->opt.allow_remote,
                "allow tcp on a non-loopback address (clients still need a known CURVE key)");
  cmd->add_flag("--curve", a->opt.curve,
                "require CURVE keys over ipc too (tcp always does; docs/THREAT_MODEL.md)");
  cmd->add_option("--device", a->device,
                  "auto (the GPU where there is one, else the CPU), cpu or gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last one given wins
  cmd->add_option("--batch-window-us", a->opt.batch_window_us,
                  "embed coalescing window in microseconds")
      ->capture_default_str();
  cmd->add_option("--join-window-us", a->opt.join_window_us,
                  "with no generation stepping, a new round's first step waits until no "
                  "request has come for this long (at most 4x), so requests sent together start "
                  "together; forks and opens meanwhile run at once (0: no wait)")
      ->capture_default_str();
  cmd->add_flag("--no-coalesce", a->no_coalesce,
                "run each embed request as its own engine call (no batching across requests)");
  cmd->add_option("--embed-token-budget", a->opt.embed_token_budget,
                  "dispatch queued embeds once this many tokens wait")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", a->opt.prefill_chunk,
                  "prompt tokens per sequence per generation step")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk-alone", a->opt.prefill_chunk_alone,
                  "prompt tokens per step for a sequence that runs alone")
      ->capture_default_str();
  cmd->add_option(
      "--slots", a->slots,
      "most state slots: sequences and sessions held at once (default: on a GPU as many "
      "as its memory holds beside the model, at most 256, taken as first used; 32 "
      "on the CPU)");
  cmd->add_option("--max-chunk", a->max_chunk,
                  "most tokens of one sequence in one engine forward (bigger: faster prefill, "
                  "more GPU memory for activations)")
      ->check(CLI::Range(1u, 8192u))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "cpu threads (0 = all cores)");
  cmd->add_option("--prefix-cache-mb", a->prefix_cache_mb, "prefix state cache budget (0 = off)")
      ->capture_default_str();
  cmd->add_option("--shm-mb", a->shm_mb, "shared-memory ring size (0 = inline only)")
      ->capture_default_str();
  cmd->add_option("--lease-timeout-s", a->opt.lease_timeout_s,
                  "check that a client holding ring leases this long is still there")
      ->capture_default_str();
  cmd->add_option("--drain-s", a->opt.drain_s,
                  "on SIGTERM/SIGINT take no new work and finish what runs for up to this many "
                  "seconds, then stop (a second signal stops at once; 0: stop at once)")
      ->capture_default_str();
  cmd->add_option("--session-idle-s", a->opt.session_idle_s, "close sessions unused for this long")
      ->capture_default_str();
  cmd->add_option("--heartbeat-ms", a->opt.heartbeat_ms,
                  "heartbeat to clients waiting this long on a request (0 = none)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->opt.limits.max_tokens, "tokens per request")
      ->capture_default_str();
  cmd->add_option("--max-batch", a->opt.limits.max_batch, "inputs per embed request")
      ->capture_default_str();
  cmd->add_option("--max-message-bytes", a->opt.limits.max_message_bytes, "bytes per request")
      ->capture_default_str();
  cmd->add_option("--max-sessions-per-client", a->opt.max_sessions_per_client,
                  "open sessions one client may hold")
      ->capture_default_str();
  cmd->add_option("--max-inflight-per-client", a->opt.max_inflight_per_client,
                  "requests one client may have queued or running")
      ->capture_default_str();
  cmd->add_option("--max-leases-per-client", a->opt.max_leases_per_client,
                  "ring leases one client may hold (then tensors come inline)")
      ->capture_default_str();
  cmd->add_option("--fair-quantum-steps", a->opt.fair_quantum_steps,
                  "with more clients waiting than slots, a generation yields its slot after this "
                  "many steps (0: only a client over its fair part yields)")
      ->capture_default_str();
  cmd->add_option("--client-queue", a->opt.client_queue,
                  "replies queued for one client; a client that lets it fill is dropped")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000000u));
  cmd->add_option("--client-queue-bytes", a->opt.client_queue_bytes,
                  "bytes of replies queued for one client; a reply past it is dropped for an "
                  "error (quota_exceeded)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1} << 16, uint64_t{1} << 40));
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace rwkvd::tools
