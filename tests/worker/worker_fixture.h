#pragma once
// A real worker (Server + CPU backend) in-process on a private ipc endpoint, and a second,
// independent backend on the same model to compute what the answers must be.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "clients/cpp/client.h"
#include "engine/backend.h"
#include "engine/sampler.h"
#include "protocol/shm_ring.h"
#include "tests/support/fixtures.h"
#include "worker/server.h"

namespace rwkvd::test {

// The fixture model every worker test serves.
inline constexpr const char* kTinyWorkerModel = "rwkv7/tiny-rwkv7-834K.f32.gguf";

// The error code `fn` fails with (a test failure if it does not fail).
template <typename F>
protocol::ErrorCode code_of(F&& fn) {
  try {
    fn();
  } catch (const client::WorkerError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return protocol::ErrorCode::kInternal;
}

// Token i is byte i: exactly the tiny model's vocabulary.
class ByteCodec : public worker::TextCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    for (unsigned char c : text) out.push_back(c);
    return out;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string s;
    for (int32_t id : ids) s += static_cast<char>(id);
    return s;
  }
};

// Polls until pred() holds, for at most 10 s: false then (a test's failure, not a hang). For
// what the worker does just after a reply (gauges the engine thread publishes between steps) or
// beside the test (requests another thread sends).
template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A counter in the worker's stats, stats[group][name]; 0 before its first count (no entry yet).
inline uint64_t stats_count(client::Client& c, const char* group, const char* name) {
  const protocol::Value stats = c.stats();
  const protocol::Value* n = stats.find(group)->find(name);
  return n != nullptr ? n->as_uint() : 0;
}

class WorkerTest : public ::testing::Test {
 protected:
  void start(const std::filesystem::path& model, worker::ServeOptions opt = {}) {
    dir_ = std::filesystem::temp_directory_path() /
           ("rwkvd-test-" + std::to_string(::getpid()) + "-" + protocol::random_hex(4));
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
    if (opt.endpoint.empty()) opt.endpoint = "ipc://" + (dir_ / "w.sock").string();
    engine::BackendOptions bo;
    bo.n_slots = slots_;
    bo.n_threads = 2;
    auto backend = engine::make_cpu_backend(engine::Rwkv7Model::load(model.string()), bo);
    if (wrap_backend_) backend = wrap_backend_(std::move(backend));
    if (!codec_) codec_ = std::make_shared<ByteCodec>();
    server_ = std::make_unique<worker::Server>(std::move(backend), codec_, opt,
                                               worker::ModelInfo{"test", model.string(), 0});
    server_->bind();
    endpoint_ = server_->endpoint();  // a tcp port of "*" resolved
    thread_ = std::thread([this] { server_->run(); });
    engine::BackendOptions ro;
    ro.n_slots = 2;
    ro.n_threads = 1;
    ref_ = engine::make_cpu_backend(engine::Rwkv7Model::load(model.string()), ro);
  }
  void TearDown() override {
    if (server_) {
      server_->request_stop();
      if (thread_.joinable()) thread_.join();
      server_.reset();
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<client::Client> connect(bool shm = true) {
    return std::make_unique<client::Client>(endpoint_, std::chrono::seconds(30), shm);
  }
  // n clients, each on its own connection, all connected before any sends: client i embeds
  // "text number i". Returns each client's embedding.
  std::vector<std::vector<float>> embed_from_clients(int n) {
    std::vector<std::thread> threads;
    std::vector<std::vector<float>> got(n);
    std::atomic<int> ready{0};
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        auto c = connect();
        c->hello();
        ready++;
        while (ready.load() < n) std::this_thread::yield();
        const auto t = c->embed({protocol::Input{"text number " + std::to_string(i), {}}});
        got[i].assign(t.data().begin(), t.data().end());
      });
    }
    for (auto& t : threads) t.join();
    return got;
  }
  // The reference: one sequence alone on a fresh slot.
  std::vector<float> ref_run(std::span<const int32_t> toks, engine::OutputMode mode,
                             const std::vector<float>* state = nullptr) {
    if (state) {
      ref_->write_state(0, *state);
    } else {
      ref_->reset_state(0);
    }
    const engine::SequenceInput in{0, toks, mode};
    return ref_->run({&in, 1})[0].data;
  }
  std::vector<float> ref_state() {
    std::vector<float> s(ref_->hparams().state_floats());
    ref_->read_state(0, s);
    return s;
  }
  // A generation by hand: the prompt, then n tokens each drawn by `sampler` and fed back.
  std::vector<int32_t> ref_generate(std::span<const int32_t> prompt, engine::Sampler& sampler,
                                    int n) {
    std::vector<float> logits = ref_run(prompt, engine::OutputMode::kLastLogits);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(sampler.sample(logits));
      const std::vector<float> st = ref_state();
      logits =
          ref_run(std::span<const int32_t>(&out.back(), 1), engine::OutputMode::kLastLogits, &st);
    }
    return out;
  }

  static uint64_t slots_used(client::Client& c) { return c.stats().find("slots_used")->as_uint(); }
  // slots_used is a gauge the engine thread publishes between its steps, possibly just after
  // the reply that changed it: wait (bounded) for it to settle at `want`.
  static uint64_t slots_used_settled(client::Client& c, uint64_t want) {
    uint64_t n = 0;
    eventually([&] { return (n = slots_used(c)) == want; });
    return n;
  }

  // Set before start() to serve with another codec than ByteCodec.
  std::shared_ptr<const worker::TextCodec> codec_;
  // Set before start() to put something between the worker and its backend (fault injection).
  std::function<std::unique_ptr<engine::Backend>(std::unique_ptr<engine::Backend>)> wrap_backend_;
  uint32_t slots_ = 8;  // the worker backend's state slots (set before start())
  // Starts the worker on its backend wrapped in a W (a test double that forwards to it);
  // returns the wrapper, which the worker owns.
  template <class W>
  W* start_wrapped(const std::filesystem::path& model, worker::ServeOptions opt = {}) {
    W* made = nullptr;
    wrap_backend_ =
        [&made](std::unique_ptr<engine::Backend> b) -> std::unique_ptr<engine::Backend> {
      auto w = std::make_unique<W>(std::move(b));
      made = w.get();
      return w;
    };
    start(model, std::move(opt));
    wrap_backend_ = nullptr;  // it captured a local
    return made;
  }
  std::filesystem::path dir_;
  std::string endpoint_;
  std::unique_ptr<worker::Server> server_;
  std::thread thread_;
  std::unique_ptr<engine::Backend> ref_;
};

inline void expect_near(std::span<const float> a, std::span<const float> b, float tol = 2e-5f) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LE(worst, tol);
}

}  // namespace rwkvd::test
