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
constexpr int kEmbedProcesses = 8;

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
                             const std::vector<std::vector<int32_t>>& docs, int k, int ready_fd,
                             int go_fd, int res_fd) {
  ChildResult r;
  try {
    client::Client c(endpoint, kClientTimeout);
    c.hello();  // maps the ring
    if (::write(ready_fd, "r", 1) != 1) throw std::runtime_error("ready pipe");
    char b;
    while (::read(go_fd, &b, 1) != 0) {  // EOF: go (the parent closed its end)
      if (errno != EINTR) break;
    }
    for (size_t d = static_cast<size_t>(k); d < docs.size(); d += kEmbedProcesses) {
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

// kEmbedProcesses forked processes, each with its own client, embed docs[k], docs[k + 8], ...
// one document per request, all released at once when every one is connected. This process
// must hold no ZeroMQ context while it forks.
EmbedRound embed_from_processes(const std::string& endpoint,
                                const std::vector<std::vector<int32_t>>& docs) {
  int ready[2], go[2], res[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0 ||
      ::pipe2(res, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("bench: pipe: ") + std::strerror(errno));
  }
  std::fflush(nullptr);
  std::vector<pid_t> kids;
  for (int k = 0; k < kEmbedProcesses; ++k) {
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      ::close(res[0]);
      child_main(endpoint, docs, k, ready[1], go[0], res[1]);
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
  while (static_cast<size_t>(n_ready) < kids.size() && kids.size() == kEmbedProcesses) {
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
  const bool all_ready = n_ready == kEmbedProcesses;
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

}  // namespace

void run_client_bench(const BenchOptions& o, BenchReport& report) {
  const int R = std::max(1, o.repeats);
  const bench::Sizes sizes(o);
  const std::string email = bench::document(o);
  const std::vector<std::string> fields = bench::field_prompts(o);

  char tmpl[] = "/tmp/rwkvd-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    throw std::runtime_error(std::string("bench: mkdtemp: ") + std::strerror(errno));
  }
  const std::filesystem::path dir = tmpl;
  struct RemoveDir {
    std::filesystem::path p;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } remove_dir{dir};
  const std::string endpoint = "ipc://" + (dir / "worker.sock").string();
  const uint64_t shm_mb = ring_mb();
  auto serve_args = [&](bool coalesce) {
    std::vector<std::string> a{
        "serve",       "--model", o.model,    "--endpoint",          endpoint, "--device", o.device,
        "--log-level", "warn",    "--shm-mb", std::to_string(shm_mb)};
    if (o.threads > 0) {
      a.push_back("--threads");
      a.push_back(std::to_string(o.threads));
    }
    if (!coalesce) a.push_back("--no-coalesce");
    return a;
  };
  // A log file per worker process: polling a reused one could find the last worker's "ready".
  int n_workers = 0;
  auto next_log = [&] {
    return (dir / ("worker-" + std::to_string(n_workers++) + ".log")).string();
  };

  bench::phase("client: worker start");
  // 1. A fresh worker process per repeat: start -> ready (listening) -> first generated token.
  std::unique_ptr<WorkerProcess> worker;
  for (int r = 0; r < R; ++r) {
    worker.reset();
    const auto t0 = Clock::now();
    worker = std::make_unique<WorkerProcess>(serve_args(true), next_log());
    worker->wait_ready(t0);
    const double ready_ms = ms_since(t0);
    client::Client c(endpoint, kClientTimeout);
    client::GenerateOptions g;
    g.sampling.max_tokens = 1;
    g.sampling.temperature = 0;
    g.sampling.seed = 1;
    const auto first = c.generate(Input{"Hello", {}}, g);
    const double first_ms = ms_since(t0);
    if (first.tokens.size() != 1) throw std::runtime_error("bench: no first token");
    report.add("load.process_ready_ms", "ms", ready_ms);
    report.add("load.process_first_token_ms", "ms", first_ms);
  }

  bench::phase("client: document state");
  // 2. Document -> state in this process, through the ring and inline.
  uint64_t state_floats = 0, n_vocab = 0, n_embd = 0;
  nlohmann::json client_ctx;
  {
    client::Client shm(endpoint, kClientTimeout, true);
    client::Client inl(endpoint, kClientTimeout, false);
    const Value hello = shm.hello();
    inl.hello();
    const Value& model = *hello.find("model");
    state_floats = model.find("state_floats")->as_uint();
    n_vocab = model.find("n_vocab")->as_uint();
    n_embd = model.find("n_embd")->as_uint();
    if (!model.find("has_tokenizer")->as_bool()) {
      throw std::runtime_error("bench: the model has no tokenizer; the client figures send text");
    }
    if (!shm.shm_mapped()) {
      throw std::runtime_error("bench: the client could not map the worker's shared memory");
    }
    struct DocState {
      double total_ms, fetch_ms;
      bool in_shm;
      std::vector<float> copy;
    };
    auto doc_state = [&](client::Client& c, bool keep) {
      const auto t0 = Clock::now();
      const uint64_t sid = c.session_open();
      c.session_feed(sid, Input{email, {}});
      const auto t1 = Clock::now();
      const client::Tensor st = c.session_state(sid);
      volatile double sink = sum_of(st.data());  // the client reads every float
      (void)sink;
      DocState d{ms_since(t0), ms_since(t1), st.in_shared_memory(), {}};
      if (st.numel() != state_floats) throw std::runtime_error("bench: state of the wrong size");
      if (keep) d.copy.assign(st.data().begin(), st.data().end());
      c.session_close(sid);
      return d;
    };
    const DocState a = doc_state(shm, true), b = doc_state(inl, true);  // warm-up, untimed
    if (!a.in_shm) std::fprintf(stderr, "bench: the state came inline: the ring is too small\n");
    client_ctx["doc_state_via_ring"] = a.in_shm;
    client_ctx["doc_state_ring_equals_inline"] = a.copy == b.copy;
    for (int r = 0; r < R; ++r) {
      const DocState s = doc_state(shm, false);
      report.add("doc_state.client_ms", "ms", s.total_ms);
      report.add("doc_state.client_fetch_ms", "ms", s.fetch_ms);
      const DocState i = doc_state(inl, false);
      report.add("doc_state.client_inline_ms", "ms", i.total_ms);
      report.add("doc_state.client_inline_fetch_ms", "ms", i.fetch_ms);
    }

    // The document's embedding (a stateless embed: it waits out the coalescing window alone).
    for (int r = 0; r < R; ++r) {
      const auto t0 = Clock::now();
      const client::Tensor e = shm.embed({Input{email, {}}});
      volatile double sink = sum_of(e.data());
      (void)sink;
      report.add("embed.email_client_ms", "ms", ms_since(t0));
    }

    bench::phase("client: field analysis");
    // 3. Field analysis from the document's state: 6 clients at once.
    // The worker's generation steps of each way (sequences per engine run: runs), to see why
    // one takes longer than the other.
    const auto gen_steps = [&](const Value& before) {
      return histogram_delta(*before.find("generate")->find("batch_sequences"),
                             *fetch_stats(endpoint).find("generate")->find("batch_sequences"));
    };
    const auto engine_delta = [](const Value& before, const Value& after) {
      nlohmann::json out = nlohmann::json::object();
      const nlohmann::json was = to_json(*before.find("engine_ms")),
                           now = to_json(*after.find("engine_ms"));
      for (const auto& [call, v] : now.items()) {
        const auto calls = v["calls"].get<uint64_t>() -
                           (was.contains(call) ? was[call]["calls"].get<uint64_t>() : 0);
        const double ms = v["total_ms"].get<double>() -
                          (was.contains(call) ? was[call]["total_ms"].get<double>() : 0.0);
        out[call] = {{"calls", calls}, {"total_ms", ms}};
      }
      return out;
    };
    // And the worker's latencies per op after the 6-client rounds (its last 1024 of each op).
    const auto op_latencies = [&] { return to_json(*fetch_stats(endpoint).find("latency_ms")); };
    FieldRound last;
    const Value before_clients = fetch_stats(endpoint);
    // Each client sends the document's state to open its session (21.6 MB each for 2.9B).
    const FieldSession open_from_state = [&](client::Client& c) { return c.session_open(a.copy); };
    for (int r = 0; r < R; ++r) {
      last = fields_in_flight(endpoint, open_from_state, fields, sizes);
      report.add("field_analysis.client_ms", "ms", last.wall_ms);
    }
    const nlohmann::json steps_clients = gen_steps(before_clients);
    client_ctx["field_worker_latency_ms"] = op_latencies();
    client_ctx["field_client_timeline_ms"] = last.timeline;  // [opened, generated, embedded]
    // Where the engine thread's time went over those rounds (forwards against state moves).
    client_ctx["field_engine_ms"] = engine_delta(before_clients, fetch_stats(endpoint));
    // The same from one client with forks of its document's session.
    FieldRound one;
    const Value before_one = fetch_stats(endpoint);
    for (int r = 0; r < R; ++r) {
      one = fields_one_client(shm, a.copy, fields, sizes);
      report.add("field_analysis.one_client_ms", "ms", one.wall_ms);
    }
    const nlohmann::json steps_one = gen_steps(before_one);
    // The 6 clients again, forking the document's session by its share token instead of sending
    // its state: the session computed from the email and shared by this client before the
    // clock, as the agent that computed the document holds it (its state in a GPU slot, so a
    // fork is a copy on the device).
    FieldRound shared;
    const Value before_shared = fetch_stats(endpoint);
    for (int r = 0; r < R; ++r) {
      const uint64_t doc = shm.session_open();
      shm.session_feed(doc, Input{email, {}});
      const std::string token = shm.session_share(doc);
      const FieldSession fork_by_token = [&](client::Client& c) {
        return c.session_fork_shared(token);
      };
      shared = fields_in_flight(endpoint, fork_by_token, fields, sizes);
      report.add("field_analysis.shared_clients_ms", "ms", shared.wall_ms);
      shm.session_close(doc);
    }
    const nlohmann::json steps_shared = gen_steps(before_shared);
    client_ctx["field_shared_timeline_ms"] = shared.timeline;  // [forked, generated, embedded]
    client_ctx["field_shared_tokens_match_clients"] = shared.tokens == last.tokens;
    client_ctx["field_step_histograms"] = {
        {"clients", steps_clients}, {"one_client", steps_one}, {"shared_clients", steps_shared}};
    report.add_note("field analysis steps, " + std::to_string(fields.size()) + " clients (" +
                    std::to_string(R) +
                    " rounds; sequences per engine run: runs): " + histogram_line(steps_clients));
    report.add_note("field analysis steps, one client (" + std::to_string(R) +
                    " rounds): " + histogram_line(steps_one));
    report.add_note("field analysis steps, " + std::to_string(fields.size()) +
                    " clients forking by token (" + std::to_string(R) +
                    " rounds): " + histogram_line(steps_shared));
    // The two ways batch the fields' steps differently (6 clients start staggered), and a step
    // of up to 4 sequences multiplies on int8 inputs where one of 5 to 16 runs on tensor cores
    // (docs/VULKAN.md): their last-bit differences can flip a greedy pick
    // among a random-weight model's near-equal logits. So the answers are compared and recorded,
    // not required equal; per field, the tokens in common before the first difference (a wrong
    // state or a mixed-up session would differ from the first token).
    std::vector<size_t> common;
    for (size_t f = 0; f < fields.size(); ++f) {
      const auto& alone = one.tokens[f];
      const auto& apart = last.tokens[f];
      const auto n = std::min(alone.size(), apart.size());
      size_t k = 0;
      while (k < n && alone[k] == apart[k]) ++k;
      common.push_back(k);
    }
    client_ctx["field_tokens_match_one_client"] = one.tokens == last.tokens;
    client_ctx["field_common_prefix_tokens"] = common;
    if (one.tokens != last.tokens) {
      report.add_note(
          "field analysis: one client's answers differ from 6 clients' (tokens in "
          "common per field: " +
          nlohmann::json(common).dump() + ")");
    }
    std::vector<std::string> answers;
    for (const auto& t : last.tokens) answers.push_back(shm.detokenize(t));
    client_ctx["field_answers"] = answers;  // random-weight models: noise, maybe not UTF-8
    client_ctx["field_tokens"] = last.tokens;
    if (const auto engine_tokens = report.context("field_tokens"); !engine_tokens.is_null()) {
      client_ctx["field_tokens_match_engine"] = engine_tokens == nlohmann::json(last.tokens);
    }
  }  // no ZeroMQ context left in this process: the embed phase forks

  bench::phase("client: embedding throughput");
  // 4. Embedding throughput from 8 processes, coalescing on (this worker), then off.
  std::vector<std::vector<int32_t>> docs;
  for (size_t d = 0; d < sizes.n_docs; ++d) {
    docs.push_back(bench::pseudo_tokens(sizes.doc_len, static_cast<uint32_t>(n_vocab), 99 + d));
  }
  nlohmann::json hist = nlohmann::json::object();
  for (const bool coalesce : {true, false}) {
    const std::string name = coalesce ? "coalesced" : "single";
    if (!coalesce) {
      worker.reset();
      const auto t0 = Clock::now();
      worker = std::make_unique<WorkerProcess>(serve_args(false), next_log());
      worker->wait_ready(t0);
    }
    {
      client::Client warm(endpoint, kClientTimeout);  // one untimed dispatch
      warm.embed({Input{std::nullopt, docs[0]}});
    }
    const Value before = fetch_stats(endpoint);
    for (int r = 0; r < R; ++r) {
      const Value b = fetch_stats(endpoint);
      const EmbedRound round = embed_from_processes(endpoint, docs);
      const Value a = fetch_stats(endpoint);
      const auto h = histogram_delta(*b.find("embed")->find("batch_sequences"),
                                     *a.find("embed")->find("batch_sequences"));
      report.add("embed.client_" + name + ".docs_s", "docs/s",
                 static_cast<double>(round.docs) / (round.wall_ms / 1000));
      report.add("embed.client_" + name + ".batch_mean", "seq/run", h["mean"].get<double>());
      client_ctx["embed_" + name + "_via_ring"] = round.in_shm == round.docs;
    }
    const Value after = fetch_stats(endpoint);
    const Value& e0 = *before.find("embed");
    const Value& e1 = *after.find("embed");
    hist[name] = {{"batch_sequences",
                   histogram_delta(*e0.find("batch_sequences"), *e1.find("batch_sequences"))},
                  {"batch_requests",
                   histogram_delta(*e0.find("batch_requests"), *e1.find("batch_requests"))}};
    report.add_note("embed batch sizes, " + name + " (sequences per engine run: runs): " +
                    histogram_line(hist[name]["batch_sequences"]));
  }
  worker.reset();

  client_ctx["worker_args"] = serve_args(true);
  client_ctx["shm_mb"] = shm_mb;
  client_ctx["embed_processes"] = kEmbedProcesses;
  client_ctx["embed_docs"] = sizes.n_docs;
  client_ctx["embed_doc_tokens"] = sizes.doc_len;
  client_ctx["n_embd"] = n_embd;
  client_ctx["embed_batch_histograms"] = hist;
  report.set_context("client", client_ctx);
}

}  // namespace rwkvd::tools
