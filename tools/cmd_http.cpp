// `rwkvd http`: the OpenAI-compatible HTTP front of a running worker (clients/http), until
// SIGINT/SIGTERM. It is a client of the worker: start `rwkvd serve` first.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "clients/http/front.h"
#include "tools/commands.h"

namespace rwkvd::tools {
namespace {

struct HttpArgs {
  http::HttpOptions opt;
  double timeout_s = 600;
};

// Blocks SIGINT and SIGTERM in every thread (call before any starts); the returned thread
// waits for one and stops the front from outside a signal handler.
std::thread stop_on_signal(http::Front& front) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return std::thread([&front, set] {
    int sig = 0;
    sigwait(&set, &sig);
    front.stop();
  });
}

void run_http(HttpArgs& a) {
  if (a.opt.api_key.empty()) {
    if (const char* k = std::getenv("RWKVD_API_KEY")) a.opt.api_key = k;
  }
  a.opt.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  ::signal(SIGPIPE, SIG_IGN);
  http::Front front(a.opt);
  std::thread waiter = stop_on_signal(front);
  const int port = front.bind();
  const auto& o = front.options();
  if (o.allow_remote && o.api_key.empty() && !http::is_loopback_host(o.host)) {
    std::fprintf(stderr,
                 "rwkvd http: warning: %s is reachable from other hosts and no --api-key "
                 "is set: anyone who reaches it can use the worker\n",
                 o.host.c_str());
  }
  std::fprintf(stderr, "rwkvd http: listening on http://%s:%d for the worker at %s (%s)\n",
               o.host.c_str(), port, o.endpoint.c_str(),
               o.api_key.empty() ? "no API key" : "API key required");
  // Says so at once when the worker is not there, without holding up the first requests.
  std::thread probe([&front] {
    if (const std::string why = front.probe_worker(); !why.empty())
      std::fprintf(stderr, "rwkvd http: warning: %s; requests get 503 until it answers\n",
                   why.c_str());
  });
  front.run();
  probe.join();
  pthread_kill(waiter.native_handle(), SIGTERM);  // stopped by a signal: already gone
  waiter.join();
  std::fprintf(stderr, "rwkvd http: stopped\n");
}

}  // namespace

void add_http_command(CLI::App& app) {
  auto a = std::make_shared<HttpArgs>();
  auto* cmd = app.add_subcommand(
      "http",
      "OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
      "/v1/embeddings, /v1/models, /v1/states, /metrics, /health) for a running worker");
  cmd->add_option("--endpoint", a->opt.endpoint,
                  "worker endpoint (default: $RWKVD_ENDPOINT or the per-user ipc socket)");
  cmd->add_option("--host", a->opt.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->opt.port, "port (0: any free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_flag("--allow-remote", a->opt.allow_remote,
                "allow a non-loopback --host (set an --api-key too)");
  cmd->add_option("--api-key", a->opt.api_key,
                  "require 'Authorization: Bearer KEY' (default: $RWKVD_API_KEY; none: open)");
  cmd->add_option("--timeout", a->timeout_s,
                  "seconds to wait for each worker reply (a whole non-streamed generation is one)")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", a->opt.max_body_bytes, "largest request body (else 413)")
      ->capture_default_str();
  cmd->add_option("--threads", a->opt.threads, "requests served at once")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  cmd->callback([a] { run_http(*a); });
}

}  // namespace rwkvd::tools
