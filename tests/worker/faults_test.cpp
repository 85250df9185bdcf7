// Faults inside the worker: a backend that fails (fault injection), a client that times out
// against a stuck worker and then finds a new one, and the absurd --slots request.
#include <zmq.hpp>

#include <chrono>
#include <thread>

#include "engine/error.h"
#include "tests/worker/faulty_backend.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::ErrorCode;
using protocol::Input;

const char* const kTiny = kTinyWorkerModel;

class FaultTest : public WorkerTest {
 protected:
  void start_faulty(const std::filesystem::path& model) {
    faulty_ = start_wrapped<FaultyBackend>(model);
  }
  FaultyBackend* faulty_ = nullptr;
};

TEST_F(FaultTest, BackendAllocationFailuresAreErrorRepliesAndLeakNoSlots) {
  RWKVD_FIXTURE(model, kTiny);
  start_faulty(model);
  auto c = connect();
  client::GenerateOptions o;
  o.sampling.max_tokens = 4;
  o.sampling.temperature = 0;
  const auto expected = c->generate(Input{"hello", {}}, o).tokens;

  faulty_->fail_runs = 1;
  EXPECT_EQ(code_of([&] { c->generate(Input{"hello", {}}, o); }), ErrorCode::kInternal);
  faulty_->fail_runs = 1;
  EXPECT_EQ(code_of([&] { c->embed({Input{"abc", {}}}); }), ErrorCode::kInternal);
  // State copies fail while a slot is being set up, more times than there are slots: each
  // must give its slot back or the worker would run dry (8 slots).
  client::GenerateOptions with_state = o;
  with_state.state = std::vector<float>(ref_->hparams().state_floats(), 0.0f);
  for (int i = 0; i < 12; ++i) {
    faulty_->fail_state_io = 1;
    EXPECT_EQ(code_of([&] { c->generate(Input{"x", {}}, with_state); }), ErrorCode::kInternal);
  }
  const uint64_t s = c->session_open();
  c->session_feed(s, Input{"abc", {}});
  faulty_->fail_state_io = 1;
  EXPECT_EQ(code_of([&] { c->session_state(s); }), ErrorCode::kInternal);

  EXPECT_EQ(slots_used_settled(*c, 1), 1u);                        // only the session's
  EXPECT_EQ(c->generate(Input{"hello", {}}, o).tokens, expected);  // and it still serves
  EXPECT_EQ(c->generate(Input{"x", {}}, with_state).tokens.size(), 4u);
}

TEST_F(FaultTest, EvictedSessionWhoseRestoreFailsKeepsNoSlot) {
  RWKVD_FIXTURE(model, kTiny);
  start_faulty(model);
  auto c = connect();
  std::vector<uint64_t> sessions;
  for (int i = 0; i < 10; ++i) {  // more sessions than the 8 slots: some live on the host
    sessions.push_back(c->session_open());
    c->session_feed(sessions.back(), Input{"state " + std::to_string(i), {}});
  }
  // The first two sessions now live on the host (least recently used). Free a slot, so restoring
  // the first takes it without an eviction, and make that restore fail.
  c->session_close(sessions.back());
  sessions.pop_back();
  faulty_->fail_state_io = 1;
  EXPECT_EQ(code_of([&] { c->session_feed(sessions[0], Input{"x", {}}); }), ErrorCode::kInternal);
  int failures = 1;
  for (int round = 0; round < 3; ++round) {
    for (uint64_t s : sessions) {
      faulty_->fail_state_io = 1;  // an eviction or a restore, if this feed needs one, fails
      try {
        c->session_feed(s, Input{"x", {}});
      } catch (const client::WorkerError& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInternal);
        ++failures;
      }
    }
  }
  faulty_->fail_state_io = 0;
  EXPECT_GT(failures, 0);
  for (uint64_t s : sessions) {
    try {
      c->session_feed(s, Input{"y", {}});  // every session is usable again
    } catch (const client::WorkerError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  for (uint64_t s : sessions) c->session_close(s);
  EXPECT_EQ(slots_used_settled(*c, 0), 0u);  // a slot lost in a failed restore would still count
}

TEST_F(FaultTest, AbsurdSlotCountIsAnEngineErrorNotAnAbort) {
  RWKVD_FIXTURE(model, kTiny);
  auto m = engine::Rwkv7Model::load(model.string());
  engine::BackendOptions bo;
  bo.n_slots = 4000000000u;
  EXPECT_THROW(engine::make_cpu_backend(m, bo), engine::EngineError);
  bo.n_slots = 0;  // the backend's choice
  EXPECT_EQ(engine::make_cpu_backend(m, bo)->n_slots(), 32u);
}

// A worker that accepts connections and never answers: a stuck or half-dead one.
class BlackHole {
 public:
  explicit BlackHole(const std::string& endpoint) : sock_(ctx_, zmq::socket_type::router) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.bind(endpoint);
  }
  ~BlackHole() {
    sock_.close();
    ctx_.close();
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
};

// A client fails at once, naming the endpoint and how to start a worker, where there is none:
// no socket file, or a socket that never answers the hello.
TEST_F(FaultTest, ClientSaysThereIsNoWorkerWithinASecond) {
  dir_ = std::filesystem::temp_directory_path() / ("rwkvd-nw-" + protocol::random_hex(4));
  std::filesystem::create_directories(dir_);
  const std::string ep = "ipc://" + (dir_ / "w.sock").string();
  const auto no_worker = [&](const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      client::Client c(ep, std::chrono::seconds(60));
      ADD_FAILURE() << "connected to nothing";
    } catch (const client::NoWorkerError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find(ep), std::string::npos) << msg;
      EXPECT_NE(msg.find("rwkvd serve --model FILE.gguf"), std::string::npos) << msg;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));  // not 60 s
  };
  no_worker("there is no socket");
  BlackHole hole(ep);  // it shakes hands, then says nothing: 3 s (connect.h)
  no_worker("did not answer");
}

TEST_F(FaultTest, ClientTimesOutOnAStuckWorkerThenReconnectsToANewOne) {
  RWKVD_FIXTURE(model, kTiny);
  dir_ = std::filesystem::temp_directory_path() / ("rwkvd-bh-" + protocol::random_hex(4));
  std::filesystem::create_directories(dir_);
  const std::string ep = "ipc://" + (dir_ / "w.sock").string();
  const auto serve = [&] {
    worker::ServeOptions opt;
    opt.endpoint = ep;
    engine::BackendOptions bo;
    bo.n_slots = 2;
    bo.n_threads = 1;
    server_ = std::make_unique<worker::Server>(
        engine::make_cpu_backend(engine::Rwkv7Model::load(model.string()), bo),
        std::make_shared<ByteCodec>(), opt, worker::ModelInfo{"test", model.string(), 0});
    server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  };
  serve();
  auto c = std::make_unique<client::Client>(ep, std::chrono::milliseconds(300));
  server_->request_stop();
  thread_.join();
  server_.reset();
  {
    BlackHole hole(ep);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(c->hello(), client::TimeoutError);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // no hang
  }
  std::filesystem::remove(dir_ / "w.sock");
  serve();
  // The same client object, no reconnect call: its next request reaches the new worker, and it
  // maps the new worker's ring.
  const client::Tensor t = c->embed({Input{"after", {}}});
  EXPECT_TRUE(c->shm_mapped());
  EXPECT_TRUE(t.in_shared_memory());
  EXPECT_EQ(t.shape, (std::vector<int64_t>{1, 64}));
}

}  // namespace
}  // namespace rwkvd::test
