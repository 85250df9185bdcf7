#include "tools/bench_client.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <thread>

#include "clients/cpp/client.h"
#include "tools/client_common.h"

namespace rwkvd::tools {
namespace {

using bench::Clock;
using bench::ms_since;
using protocol::Input;
using protocol::Value;

constexpr auto kClientTimeout = std::chrono::minutes(10);
constexpr auto kReadyTimeout = std::chrono::minutes(10);
// Client processes of the embedding figures: a few agents, and a batch job's many workers.
constexpr int kEmbedProcesses = 8, kManyEmbedProcesses = 64;

std::string tail_of(const std::string& path, size_t n = 4000) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

// `rwkvd serve` as a child process of this binary, its stdout and stderr in a log file. The
// child gets SIGTERM if this process dies first.
class WorkerProcess {
 public:
  WorkerProcess(std::vector<std::string> args, std::string log_path)
      : args_(std::move(args)), log_(std::move(log_path)) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>("rwkvd"));
    for (auto& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error(std::string("bench: fork: ") + std::strerror(errno));
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int null = ::open("/dev/null", O_RDONLY);
      if (fd < 0 || null < 0) ::_exit(127);
      ::dup2(null, 0);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv("/proc/self/exe", argv.data());
      ::_exit(127);
    }
  }
  ~WorkerProcess() { stop(); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Until the worker prints "ready on" (bound, listening, scheduler running).
  void wait_ready(Clock::time_point since) {
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("bench: the worker exited before it was ready (rwkvd " +
                                 join_args() + "):\n" + tail_of(log_));
      }
      if (tail_of(log_).find("rwkvd: ready on") != std::string::npos) return;
      if (Clock::now() - since > kReadyTimeout) {
        throw std::runtime_error("bench: the worker was not ready in time:\n" + tail_of(log_));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // SIGTERM, then SIGKILL after 20 s.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          std::fprintf(stderr, "bench: the worker ended with status %d:\n%s\n", status,
                       tail_of(log_).c_str());
        }
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string join_args() const {
    std::string s;
    for (const auto& a : args_) s += (s.empty() ? "" : " ") + a;
    return s;
  }
  const std::vector<std::string>& args() const { return args_; }

 private:
  std::vector<std::string> args_;
  std::string log_;
  pid_t pid_ = -1;
};

// Reads every float, as a client that uses the tensor does, into 16 independent float sums (a
// checksum and a sink, not a result). One running double sum is a chain of dependent adds, ~4
// cycles each: ~5-6 ms for a 2.9B state's 5.4M floats, which `doc_state.client_fetch_ms` would
// then time instead of the tensor's delivery (16 sums read at memory speed: ~1.2 ms on a 2-core
// EPYC development machine).
double sum_of(std::span<const float> v) {
  float lanes[16] = {};
  size_t i = 0;
  for (; i + 16 <= v.size(); i += 16) {
    for (size_t k = 0; k < 16; ++k) lanes[k] += v[i + k];
  }
  double s = 0;
  for (; i < v.size(); ++i) s += v[i];
  for (const float x : lanes) s += x;
  return s;
}

Value fetch_stats(const std::string& endpoint) {
  client::Client c(endpoint, kClientTimeout);
  return c.stats();
}

// ---- embedding throughput from forked client processes ----------------------------------

struct ChildResult {
  int32_t ok = 0;
  int32_t docs = 0;
  int32_t in_shm = 0;  // results that came through the ring
  int64_t end_ns = 0;  // steady_clock (CLOCK_MONOTONIC, the same in every process)
  double checksum = 0;
  char error[200] = {};
};
static_assert(sizeof(ChildResult) <= PIPE_BUF, "one atomic pipe write per child");

struct EmbedRound {
  double wall_ms = 0;  // the go signal -> the last child's last embedding
  int docs = 0;
  int in_shm = 0;
  double checksum = 0;
};

[[noreturn]] void child_main(const std::string& endpoint,
                             const std::vector<std::vector<int32_t>>& docs, int k, int processes,
                             int ready_fd, int go_fd, int res_fd) {
  ChildResult r;
  try {
    client::Client c(endpoint, kClientTimeout);
    c.hello();  // maps the ring
    if (::write(ready_fd, "r", 1) != 1) throw std::runtime_error("ready pipe");
    char b;
    while (::read(go_fd, &b, 1) != 0) {  // EOF: go (the parent closed its end)
      if (errno != EINTR) break;
    }
    for (size_t d = static_cast<size_t>(k); d < docs.size(); d += static_cast<size_t>(processes)) {
      const client::Tensor e = c.embed({Input{std::nullopt, docs[d]}});
      if (e.shape.size() != 2 || e.shape[0] != 1) throw std::runtime_error("bad embedding shape");
      r.checksum += sum_of(e.data());  // read the floats where they are
      r.in_shm += e.in_shared_memory() ? 1 : 0;
      r.docs += 1;
    }
    r.end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                   .count();
    r.ok = 1;
  } catch (const std::exception& e) {
    std::snprintf(r.error, sizeof r.error, "%s", e.what());
  }
  if (::write(res_fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) ::_exit(3);
  ::_exit(r.ok ? 0 : 1);
}

// `processes` forked processes, each with its own client, embed docs[k], docs[k + processes],
// ... one document per request, all released at once when every one is connected. This process
// must hold no ZeroMQ context while it forks.
EmbedRound embed_from_processes(const std::string& endpoint,
                                const std::vector<std::vector<int32_t>>& docs, int processes) {
  int ready[2], go[2], res[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0 ||
      ::pipe2(res, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("bench: pipe: ") + std::strerror(errno));
  }
  std::fflush(nullptr);
  std::vector<pid_t> kids;
  for (int k = 0; k < processes; ++k) {
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      ::close(res[0]);
      child_main(endpoint, docs, k, processes, ready[1], go[0], res[1]);
    }
    kids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  ::close(res[1]);
  std::map<pid_t, int> exited;
  auto reap = [&](bool block) {
    for (pid_t p : kids) {
      int status = 0;
      if (!exited.count(p) && ::waitpid(p, &status, block ? 0 : WNOHANG) == p) exited[p] = status;
    }
  };
  int n_ready = 0;
  const auto t_wait = Clock::now();
  while (static_cast<size_t>(n_ready) < kids.size() &&
         kids.size() == static_cast<size_t>(processes)) {
    pollfd p{ready[0], POLLIN, 0};
    ::poll(&p, 1, 100);
    if (p.revents & POLLIN) {
      char buf[16];
      const ssize_t n = ::read(ready[0], buf, sizeof buf);
      if (n <= 0) break;
      n_ready += static_cast<int>(n);
      continue;
    }
    reap(false);
    if (!exited.empty() || Clock::now() - t_wait > std::chrono::minutes(2)) break;
  }
  const bool all_ready = n_ready == processes;
  if (!all_ready) {
    for (pid_t p : kids) {
      if (!exited.count(p)) ::kill(p, SIGKILL);
    }
  }
  const auto t0 = Clock::now();
  ::close(go[1]);  // go
  reap(true);
  ::close(ready[0]);
  EmbedRound round;
  std::string error = all_ready ? "" : "not every client process came up";
  int64_t last_end = 0;
  for (size_t i = 0; i < kids.size(); ++i) {
    ChildResult r;
    pollfd p{res[0], POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || ::read(res[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) {
      if (error.empty()) error = "a client process ended without a result";
      break;
    }
    if (!r.ok) {
      if (error.empty()) error = r.error;
      continue;
    }
    round.docs += r.docs;
    round.in_shm += r.in_shm;
    round.checksum += r.checksum;
    last_end = std::max(last_end, r.end_ns);
  }
  ::close(res[0]);
  if (error.empty() && round.docs != static_cast<int>(docs.size())) error = "documents missing";
  if (!error.empty()) throw std::runtime_error("bench: embed from processes: " + error);
  round.wall_ms =
      static_cast<double>(
          last_end -
          std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count()) /
      1e6;
  return round;
}

// The difference of two of the worker's histograms (stats.embed.batch_*): {count, sum, mean,
// le: {bucket: n}} of what happened between them.
nlohmann::json histogram_delta(const Value& before, const Value& after) {
  const nlohmann::json b = to_json(before), a = to_json(after);
  nlohmann::json le = nlohmann::json::object();
  for (const auto& [k, v] : a["le"].items()) {
    const uint64_t d = v.get<uint64_t>() - b["le"].value(k, uint64_t{0});
    if (d != 0) le[k] = d;
  }
  const uint64_t count = a["count"].get<uint64_t>() - b["count"].get<uint64_t>();
  const double sum = a["mean"].get<double>() * a["count"].get<double>() -
                     b["mean"].get<double>() * b["count"].get<double>();
  return {{"count", count}, {"mean", count ? sum / static_cast<double>(count) : 0.0}, {"le", le}};
}

std::string histogram_line(const nlohmann::json& h) {
  std::string s;
  for (const auto& [k, v] : h["le"].items()) {
    s += (s.empty() ? "" : ", ") + std::string("<=") + k + ": " + std::to_string(v.get<uint64_t>());
  }
  return s;
}

// ---- field analysis: 6 clients in flight at once ------------------------------------------

struct FieldRound {
  double wall_ms = 0;
  // Per client (6 clients at once): ms from the start to the replies that give it its session
  // (open or fork), its generation and its embedding, to see which phase the clients wait in.
  std::vector<std::array<double, 3>> timeline;
  std::vector<uint64_t> sessions;
  std::vector<std::vector<int32_t>> tokens;
  double checksum = 0;
};

// How a field client gets its session on the document: it opens one from the document's state
// (which it sends), or forks the document's session, another client's, by its share token.
using FieldSession = std::function<uint64_t(client::Client&)>;

// Each field from its own client, all released at once: the client gets its session on the
// document (`field_session`), generates its field greedily, then embeds the field's end.
FieldRound fields_in_flight(const std::string& endpoint, const FieldSession& field_session,
                            const std::vector<std::string>& fields, const bench::Sizes& sizes) {
  const size_t n = fields.size();
  FieldRound round;
  round.sessions.assign(n, 0);
  round.tokens.resize(n);
  std::vector<std::string> errors(n);
  std::vector<Clock::time_point> ends(n);
  std::vector<std::array<Clock::time_point, 3>> marks(n);
  std::vector<double> sums(n, 0.0);
  std::mutex mu;
  std::condition_variable cv;
  size_t arrived = 0;
  bool go = false;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      bool here = false;
      auto arrive = [&] {
        std::unique_lock lock(mu);
        here = true;
        arrived += 1;
        cv.notify_all();
        cv.wait(lock, [&] { return go; });
      };
      try {
        client::Client c(endpoint, kClientTimeout);
        c.hello();
        arrive();
        round.sessions[i] = field_session(c);
        marks[i][0] = Clock::now();
        client::GenerateOptions g;
        g.sampling.max_tokens = static_cast<uint32_t>(sizes.field_tokens);
        g.sampling.temperature = 0;
        g.sampling.seed = 1;
        round.tokens[i] = c.generate(Input{fields[i], {}}, g, {}, round.sessions[i]).tokens;
        marks[i][1] = Clock::now();
        const client::Tensor e = c.session_embed(round.sessions[i], Input{sizes.field_end, {}});
        sums[i] = sum_of(e.data());
        ends[i] = Clock::now();  // closing is not part of the figure
        marks[i][2] = ends[i];
        c.session_close(round.sessions[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
        if (!here) arrive();
      }
    });
  }
  Clock::time_point t0;
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return arrived == n; });
    t0 = Clock::now();
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error("bench: field analysis: " + e);
  }
  round.wall_ms =
      std::chrono::duration<double, std::milli>(*std::max_element(ends.begin(), ends.end()) - t0)
          .count();
  for (double s : sums) round.checksum += s;
  for (const auto& m : marks) {
    auto at = [&](Clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - t0).count();
    };
    round.timeline.push_back({at(m[0]), at(m[1]), at(m[2])});
  }
  return round;
}

// ---- field analysis: one client, the document's session forked per field ----------------------

// What one agent does with its document's session: fork it per field, run the field prompts as
// generations in flight together on its one connection (the worker batches them), then embed
// each answer's end: three rounds of requests in flight together. The document's session
// exists before the clock starts, as it does for the agent that computed it.
FieldRound fields_one_client(client::Client& c, const std::vector<float>& doc_state,
                             const std::vector<std::string>& fields, const bench::Sizes& sizes) {
  const uint64_t doc = c.session_open(doc_state);
  FieldRound round;
  const auto t0 = Clock::now();
  // The forks in flight together too: one round trip, not one per field.
  std::vector<protocol::Request> forks(fields.size());
  for (auto& f : forks) {
    f.op = protocol::Op::kSessionFork;
    f.session = doc;
  }
  for (const protocol::Reply& r : c.call_all(forks)) {
    const protocol::Value* s = r.body.find("session");
    if (s == nullptr) throw std::runtime_error("bench: field analysis: no session in a fork reply");
    round.sessions.push_back(s->as_uint());
  }
  std::vector<Input> prompts;
  for (const std::string& f : fields) prompts.push_back(Input{f, {}});
  client::GenerateOptions g;
  g.sampling.max_tokens = static_cast<uint32_t>(sizes.field_tokens);
  g.sampling.temperature = 0;
  g.sampling.seed = 1;
  for (const client::GenerateResult& r : c.generate_all(prompts, round.sessions, g)) {
    round.tokens.push_back(r.tokens);
  }
  std::vector<protocol::Request> embeds(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    embeds[i].op = protocol::Op::kEmbed;
    embeds[i].session = round.sessions[i];
    embeds[i].inputs.push_back(Input{sizes.field_end, {}});
  }
  for (const protocol::Reply& r : c.call_all(embeds)) {
    const protocol::Value* e = r.body.find("embeddings");
    if (e == nullptr) throw std::runtime_error("bench: field analysis: no embeddings in a reply");
    round.checksum += sum_of(c.to_tensor(*e).data());
  }
  round.wall_ms = ms_since(t0);
  for (uint64_t s : round.sessions) c.session_close(s);
  c.session_close(doc);
  return round;
}

// The ring size for the workers: serve's default (256 MiB), less where /dev/shm is smaller
// (containers often give it 64 MiB).
uint64_t ring_mb() {
  uint64_t mb = 256;
  struct statvfs sv {};
  if (::statvfs("/dev/shm", &sv) == 0) {
    const uint64_t avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
    mb = std::min<uint64_t>(mb, std::max<uint64_t>(avail / 2 >> 20, 8));
  }
  return mb;
}

// A private directory under /tmp, removed with everything in it when this goes.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rwkvd-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      throw std::runtime_error(std::string("bench: mkdtemp: ") + std::strerror(errno));
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One fetch of the document's state by a client (session open, feed, state, close).
struct DocStateFetch {
  double total_ms, fetch_ms;  // the whole; from the state's request to its last float read
  bool in_shm;
  std::vector<float> copy;  // the state, where asked for
};

// The engine thread's time per call kind between two of the worker's stats (its engine_ms):
// {call: {calls, total_ms}}.
nlohmann::json engine_ms_delta(const Value& before, const Value& after) {
  nlohmann::json out = nlohmann::json::object();
  const nlohmann::json was = to_json(*before.find("engine_ms")),
                       now = to_json(*after.find("engine_ms"));
  for (const auto& [call, v] : now.items()) {
    const auto calls =
        v["calls"].get<uint64_t>() - (was.contains(call) ? was[call]["calls"].get<uint64_t>() : 0);
    const double ms = v["total_ms"].get<double>() -
                      (was.contains(call) ? was[call]["total_ms"].get<double>() : 0.0);
    out[call] = {{"calls", calls}, {"total_ms", ms}};
  }
  return out;
}

// Per field, the tokens two answers have in common before their first difference.
std::vector<size_t> common_prefixes(const std::vector<std::vector<int32_t>>& a,
                                    const std::vector<std::vector<int32_t>>& b) {
  std::vector<size_t> common;
  for (size_t f = 0; f < a.size(); ++f) {
    const auto n = std::min(a[f].size(), b[f].size());
    size_t k = 0;
    while (k < n && a[f][k] == b[f][k]) ++k;
    common.push_back(k);
  }
  return common;
}

// The field analysis's three ways (6 clients sending the state, one client forking, 6 clients
// forking by share token): each way's last round and the worker's generation steps over its
// rounds (sequences per engine run: runs).
struct FieldWays {
  FieldRound clients, one_client, shared;
  nlohmann::json steps_clients, steps_one, steps_shared;
};

// The client figures, one phase a method, in the order run() calls them, against workers this
// process starts on a private ipc endpoint. Every context entry goes to ctx_, reported as
// "client" at the end.
class ClientBench {
 public:
  ClientBench(const BenchOptions& o, BenchReport& report)
      : o_(o),
        report_(report),
        repeats_(std::max(1, o.repeats)),
        sizes_(o),
        email_(bench::document(o)),
        fields_(bench::field_prompts(o)),
        endpoint_("ipc://" + (dir_.path() / "worker.sock").string()),
        shm_mb_(ring_mb()) {}

  void run() {
    worker_start();
    document_and_fields();
    embedding_throughput();
    worker_.reset();
    record_context();
  }

 private:
  std::vector<std::string> serve_args(bool coalesce) const {
    std::vector<std::string> a{"serve",
                               "--model",
                               o_.model,
                               "--endpoint",
                               endpoint_,
                               "--device",
                               o_.device,
                               "--log-level",
                               "warn",
                               "--shm-mb",
                               std::to_string(shm_mb_)};
    if (o_.threads > 0) {
      a.push_back("--threads");
      a.push_back(std::to_string(o_.threads));
    }
    if (!coalesce) a.push_back("--no-coalesce");
    return a;
  }
  // A log file per worker process: polling a reused one could find the last worker's "ready".
  std::string next_log() {
    return (dir_.path() / ("worker-" + std::to_string(n_workers_++) + ".log")).string();
  }

  // 1. A fresh worker process per repeat: start -> ready (listening) -> first generated token.
  void worker_start() {
    bench::phase("client: worker start");
    for (int r = 0; r < repeats_; ++r) {
      worker_.reset();
      const auto t0 = Clock::now();
      worker_ = std::make_unique<WorkerProcess>(serve_args(true), next_log());
      worker_->wait_ready(t0);
      const double ready_ms = ms_since(t0);
      client::Client c(endpoint_, kClientTimeout);
      client::GenerateOptions g;
      g.sampling.max_tokens = 1;
      g.sampling.temperature = 0;
      g.sampling.seed = 1;
      const auto first = c.generate(Input{"Hello", {}}, g);
      const double first_ms = ms_since(t0);
      if (first.tokens.size() != 1) throw std::runtime_error("bench: no first token");
      report_.add("load.process_ready_ms", "ms", ready_ms);
      report_.add("load.process_first_token_ms", "ms", first_ms);
    }
  }

  // 2. and 3., through two clients of this process: one with the ring mapped, one with tensors
  // inline. Neither is left when this returns: the embed phase forks, and a process must hold no
  // ZeroMQ context while it forks.
  void document_and_fields() {
    bench::phase("client: document state");
    client::Client shm(endpoint_, kClientTimeout, true);
    client::Client inl(endpoint_, kClientTimeout, false);
    const std::vector<float> doc_state = document_state(shm, inl);
    embed_email(shm);
    field_analysis(shm, doc_state);
  }

  // 2. Document -> state in this process, through the ring and inline. Returns the state.
  std::vector<float> document_state(client::Client& shm, client::Client& inl) {
    read_model(shm, inl);
    DocStateFetch a = fetch_doc_state(shm, true);  // warm-up, untimed
    const DocStateFetch b = fetch_doc_state(inl, true);
    if (!a.in_shm) std::fprintf(stderr, "bench: the state came inline: the ring is too small\n");
    ctx_["doc_state_via_ring"] = a.in_shm;
    ctx_["doc_state_ring_equals_inline"] = a.copy == b.copy;
    for (int r = 0; r < repeats_; ++r) {
      const DocStateFetch s = fetch_doc_state(shm, false);
      report_.add("doc_state.client_ms", "ms", s.total_ms);
      report_.add("doc_state.client_fetch_ms", "ms", s.fetch_ms);
      const DocStateFetch i = fetch_doc_state(inl, false);
      report_.add("doc_state.client_inline_ms", "ms", i.total_ms);
      report_.add("doc_state.client_inline_fetch_ms", "ms", i.fetch_ms);
    }
    return std::move(a.copy);
  }

  // The model's sizes from the worker's hello; the client figures need its tokenizer (they send
  // text) and the ring mapped.
  void read_model(client::Client& shm, client::Client& inl) {
    const Value hello = shm.hello();
    inl.hello();
    const Value& model = *hello.find("model");
    state_floats_ = model.find("state_floats")->as_uint();
    n_vocab_ = model.find("n_vocab")->as_uint();
    n_embd_ = model.find("n_embd")->as_uint();
    if (!model.find("has_tokenizer")->as_bool()) {
      throw std::runtime_error("bench: the model has no tokenizer; the client figures send text");
    }
    if (!shm.shm_mapped()) {
      throw std::runtime_error("bench: the client could not map the worker's shared memory");
    }
  }

  DocStateFetch fetch_doc_state(client::Client& c, bool keep) {
    const auto t0 = Clock::now();
    const uint64_t sid = c.session_open();
    c.session_feed(sid, Input{email_, {}});
    const auto t1 = Clock::now();
    const client::Tensor st = c.session_state(sid);
    volatile double sink = sum_of(st.data());  // the client reads every float
    (void)sink;
    DocStateFetch d{ms_since(t0), ms_since(t1), st.in_shared_memory(), {}};
    if (st.numel() != state_floats_) throw std::runtime_error("bench: state of the wrong size");
    if (keep) d.copy.assign(st.data().begin(), st.data().end());
    c.session_close(sid);
    return d;
  }

  // The document's embedding (a stateless embed: it waits out the coalescing window alone).
  void embed_email(client::Client& shm) {
    for (int r = 0; r < repeats_; ++r) {
      const auto t0 = Clock::now();
      const client::Tensor e = shm.embed({Input{email_, {}}});
      volatile double sink = sum_of(e.data());
      (void)sink;
      report_.add("embed.email_client_ms", "ms", ms_since(t0));
    }
  }

  // 3. Field analysis from the document's state: 6 clients at once, then one client, then 6
  // clients forking a shared session.
  void field_analysis(client::Client& shm, const std::vector<float>& doc_state) {
    bench::phase("client: field analysis");
    FieldWays ways;
    fields_from_clients(doc_state, ways);
    fields_from_one_client(shm, doc_state, ways);
    fields_forking_shared(shm, ways);
    report_field_steps(ways);
    compare_field_answers(shm, ways);
  }

  // The worker's generation steps since `before` (sequences per engine run: runs), to see why one
  // way takes longer than another.
  nlohmann::json generation_steps_since(const Value& before) {
    return histogram_delta(*before.find("generate")->find("batch_sequences"),
                           *fetch_stats(endpoint_).find("generate")->find("batch_sequences"));
  }

  // Each client sends the document's state to open its session (21.6 MB each for 2.9B).
  void fields_from_clients(const std::vector<float>& doc_state, FieldWays& ways) {
    const Value before = fetch_stats(endpoint_);
    const FieldSession open_from_state = [&](client::Client& c) {
      return c.session_open(doc_state);
    };
    for (int r = 0; r < repeats_; ++r) {
      ways.clients = fields_in_flight(endpoint_, open_from_state, fields_, sizes_);
      report_.add("field_analysis.client_ms", "ms", ways.clients.wall_ms);
    }
    ways.steps_clients = generation_steps_since(before);
    // The worker's latencies per op after the 6-client rounds (its last 1024 of each op).
    ctx_["field_worker_latency_ms"] = to_json(*fetch_stats(endpoint_).find("latency_ms"));
    ctx_["field_client_timeline_ms"] = ways.clients.timeline;  // [opened, generated, embedded]
    // Where the engine thread's time went over those rounds (forwards against state moves).
    ctx_["field_engine_ms"] = engine_ms_delta(before, fetch_stats(endpoint_));
  }

  // The same from one client with forks of its document's session.
  void fields_from_one_client(client::Client& shm, const std::vector<float>& doc_state,
                              FieldWays& ways) {
    const Value before = fetch_stats(endpoint_);
    for (int r = 0; r < repeats_; ++r) {
      ways.one_client = fields_one_client(shm, doc_state, fields_, sizes_);
      report_.add("field_analysis.one_client_ms", "ms", ways.one_client.wall_ms);
    }
    ways.steps_one = generation_steps_since(before);
  }

  // The 6 clients again, forking the document's session by its share token instead of sending its
  // state: the session computed from the email and shared by this client before the clock, as
  // the agent that computed the document holds it (its state in a GPU slot, so a fork is a copy
  // on the device).
  void fields_forking_shared(client::Client& shm, FieldWays& ways) {
    const Value before = fetch_stats(endpoint_);
    for (int r = 0; r < repeats_; ++r) {
      const uint64_t doc = shm.session_open();
      shm.session_feed(doc, Input{email_, {}});
      const std::string token = shm.session_share(doc);
      const FieldSession fork_by_token = [&](client::Client& c) {
        return c.session_fork_shared(token);
      };
      ways.shared = fields_in_flight(endpoint_, fork_by_token, fields_, sizes_);
      report_.add("field_analysis.shared_clients_ms", "ms", ways.shared.wall_ms);
      shm.session_close(doc);
    }
    ways.steps_shared = generation_steps_since(before);
    ctx_["field_shared_timeline_ms"] = ways.shared.timeline;  // [forked, generated, embedded]
    ctx_["field_shared_tokens_match_clients"] = ways.shared.tokens == ways.clients.tokens;
  }

  void report_field_steps(const FieldWays& ways) {
    const std::string rounds = std::to_string(repeats_);
    const std::string n_fields = std::to_string(fields_.size());
    ctx_["field_step_histograms"] = {{"clients", ways.steps_clients},
                                     {"one_client", ways.steps_one},
                                     {"shared_clients", ways.steps_shared}};
    report_.add_note(
        "field analysis steps, " + n_fields + " clients (" + rounds +
        " rounds; sequences per engine run: runs): " + histogram_line(ways.steps_clients));
    report_.add_note("field analysis steps, one client (" + rounds +
                     " rounds): " + histogram_line(ways.steps_one));
    report_.add_note("field analysis steps, " + n_fields + " clients forking by token (" + rounds +
                     " rounds): " + histogram_line(ways.steps_shared));
  }

  // The two ways batch the fields' steps differently (6 clients start staggered), and a step of
  // up to 4 sequences multiplies on int8 inputs where one of 5 to 16 runs on tensor cores
  // (docs/VULKAN.md): their last-bit differences can flip a greedy pick among a random-weight
  // model's near-equal logits. So the answers are compared and recorded, not required equal; per
  // field, the tokens in common before the first difference (a wrong state or a mixed-up session
  // would differ from the first token).
  void compare_field_answers(client::Client& shm, const FieldWays& ways) {
    const auto& clients = ways.clients.tokens;
    const auto& one = ways.one_client.tokens;
    const std::vector<size_t> common = common_prefixes(one, clients);
    ctx_["field_tokens_match_one_client"] = one == clients;
    ctx_["field_common_prefix_tokens"] = common;
    if (one != clients) {
      report_.add_note(
          "field analysis: one client's answers differ from 6 clients' (tokens in "
          "common per field: " +
          nlohmann::json(common).dump() + ")");
    }
    std::vector<std::string> answers;
    for (const auto& t : clients) answers.push_back(shm.detokenize(t));
    ctx_["field_answers"] = answers;  // random-weight models: noise, maybe not UTF-8
    ctx_["field_tokens"] = clients;
    if (const auto engine_tokens = report_.context("field_tokens"); !engine_tokens.is_null()) {
      ctx_["field_tokens_match_engine"] = engine_tokens == nlohmann::json(clients);
    }
  }

  // 4. Embedding throughput from 8 processes, coalescing on (this worker), then off.
  void embedding_throughput() {
    bench::phase("client: embedding throughput");
    std::vector<std::vector<int32_t>> docs;
    for (size_t d = 0; d < sizes_.n_docs; ++d) {
      docs.push_back(bench::pseudo_tokens(sizes_.doc_len, static_cast<uint32_t>(n_vocab_), 99 + d));
    }
    for (const bool coalesce : {true, false}) {
      if (!coalesce) {
        worker_.reset();
        const auto t0 = Clock::now();
        worker_ = std::make_unique<WorkerProcess>(serve_args(false), next_log());
        worker_->wait_ready(t0);
      }
      embed_rounds(coalesce ? "coalesced" : "single", docs, kEmbedProcesses);
      // A batch job's many client processes (coalesced; as many as documents where fewer).
      if (coalesce) {
        const int many = std::min<int>(kManyEmbedProcesses, static_cast<int>(docs.size()));
        embed_rounds("many", docs, many);
        ctx_["embed_processes_many"] = many;
      }
    }
  }

  // The embedding rounds on the running worker, after one untimed dispatch; `name` is its way of
  // batching, in the figures' names and the batch-size histograms.
  void embed_rounds(const std::string& name, const std::vector<std::vector<int32_t>>& docs,
                    int processes) {
    {
      client::Client warm(endpoint_, kClientTimeout);
      warm.embed({Input{std::nullopt, docs[0]}});
    }
    const Value before = fetch_stats(endpoint_);
    for (int r = 0; r < repeats_; ++r) {
      const Value b = fetch_stats(endpoint_);
      const EmbedRound round = embed_from_processes(endpoint_, docs, processes);
      const Value a = fetch_stats(endpoint_);
      const auto h = histogram_delta(*b.find("embed")->find("batch_sequences"),
                                     *a.find("embed")->find("batch_sequences"));
      report_.add("embed.client_" + name + ".docs_s", "docs/s",
                  static_cast<double>(round.docs) / (round.wall_ms / 1000));
      report_.add("embed.client_" + name + ".batch_mean", "seq/run", h["mean"].get<double>());
      ctx_["embed_" + name + "_via_ring"] = round.in_shm == round.docs;
    }
    const Value after = fetch_stats(endpoint_);
    const Value& e0 = *before.find("embed");
    const Value& e1 = *after.find("embed");
    embed_hist_[name] = {{"batch_sequences", histogram_delta(*e0.find("batch_sequences"),
                                                             *e1.find("batch_sequences"))},
                         {"batch_requests",
                          histogram_delta(*e0.find("batch_requests"), *e1.find("batch_requests"))}};
    report_.add_note("embed batch sizes, " + name + " (sequences per engine run: runs): " +
                     histogram_line(embed_hist_[name]["batch_sequences"]));
  }

  void record_context() {
    ctx_["worker_args"] = serve_args(true);
    ctx_["shm_mb"] = shm_mb_;
    ctx_["embed_processes"] = kEmbedProcesses;
    ctx_["embed_docs"] = sizes_.n_docs;
    ctx_["embed_doc_tokens"] = sizes_.doc_len;
    ctx_["n_embd"] = n_embd_;
    ctx_["embed_batch_histograms"] = embed_hist_;
    report_.set_context("client", ctx_);
  }

  const BenchOptions& o_;
  BenchReport& report_;
  const int repeats_;
  const bench::Sizes sizes_;
  const std::string email_;
  const std::vector<std::string> fields_;
  // Declaration order is destruction order reversed: a worker stops before its directory goes.
  TempDir dir_;
  const std::string endpoint_;
  const uint64_t shm_mb_;
  int n_workers_ = 0;
  std::unique_ptr<WorkerProcess> worker_;
  uint64_t state_floats_ = 0, n_vocab_ = 0, n_embd_ = 0;  // the model's, from the hello
  nlohmann::json ctx_;
  nlohmann::json embed_hist_ = nlohmann::json::object();
};

}  // namespace

void run_client_bench(const BenchOptions& o, BenchReport& report) {
  ClientBench(o, report).run();
}

}  // namespace rwkvd::tools
