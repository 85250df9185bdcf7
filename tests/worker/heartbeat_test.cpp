// Heartbeats (PROTOCOL.md): a client tells a slow request, which heartbeats keep alive past its
// liveness window, from a dead worker, which it gives up on after that window instead of after
// its whole timeout.
#include <zmq.hpp>

#include "protocol/codec.h"
#include "tests/worker/faulty_backend.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
const char* const kTiny = kTinyWorkerModel;
constexpr uint32_t kHeartbeatMs = 100;  // liveness: 300 ms

class HeartbeatTest : public WorkerTest {
 protected:
  void start_slow(const std::filesystem::path& model, int run_delay_ms) {
    wrap_backend_ = [run_delay_ms](std::unique_ptr<engine::Backend> b) {
      auto f = std::make_unique<FaultyBackend>(std::move(b));
      f->run_delay_ms = run_delay_ms;
      return std::unique_ptr<engine::Backend>(std::move(f));
    };
    worker::ServeOptions opt;
    opt.heartbeat_ms = kHeartbeatMs;
    start(model, opt);
  }
};

TEST_F(HeartbeatTest, HelloSaysHowOften) {
  RWKVD_FIXTURE(model, kTiny);
  start_slow(model, 0);
  auto c = connect();
  EXPECT_EQ(c->hello().find("heartbeat_ms")->as_uint(), kHeartbeatMs);
}

TEST_F(HeartbeatTest, ASlowRequestIsKeptAliveByHeartbeats) {
  RWKVD_FIXTURE(model, kTiny);
  start_slow(model, 500);  // each engine run: 500 ms, well past the 300 ms liveness
  // The client's own view: it learnt the interval from hello and does not give up.
  auto c = connect();
  c->hello();
  client::GenerateOptions o;
  o.sampling.max_tokens = 2;
  o.sampling.temperature = 0;
  const auto t0 = Clock::now();
  EXPECT_EQ(c->generate(protocol::Input{"slow", {}}, o).tokens.size(), 2u);
  EXPECT_GE(Clock::now() - t0, milliseconds(3 * kHeartbeatMs));  // it really outlived liveness

  // On the wire: heartbeats {id: 0, ok, heartbeat} arrive while the request runs, never
  // further apart than the liveness window, and stop with the final reply.
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint_);
  protocol::Request req;
  req.id = 7;
  req.op = protocol::Op::kEmbed;
  req.inputs.push_back(protocol::Input{"slow", {}});
  (void)s.send(zmq::buffer(protocol::encode_request(req)), zmq::send_flags::none);
  int heartbeats = 0;
  auto last = Clock::now();
  for (;;) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(5000));
    ASSERT_TRUE(item.revents & ZMQ_POLLIN) << "no message for 5 s";
    EXPECT_LE(Clock::now() - last, milliseconds(protocol::kHeartbeatLiveness * kHeartbeatMs));
    last = Clock::now();
    zmq::message_t m;
    (void)s.recv(m);
    const protocol::Reply r = protocol::decode_reply(m.to_string_view());
    if (r.heartbeat) {
      EXPECT_EQ(r.id, 0u);
      EXPECT_TRUE(r.ok);
      heartbeats += 1;
      continue;
    }
    EXPECT_EQ(r.id, 7u);
    EXPECT_TRUE(r.ok);
    break;
  }
  EXPECT_GE(heartbeats, 2);  // 500 ms of work at 100 ms intervals
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, milliseconds(4 * kHeartbeatMs));
  EXPECT_FALSE(item.revents & ZMQ_POLLIN) << "a heartbeat with nothing in flight";
}

TEST_F(HeartbeatTest, ADeadWorkerIsNoticedWithinTheLivenessWindowNotTheTimeout) {
  RWKVD_FIXTURE(model, kTiny);
  start_slow(model, 0);
  client::Client c(endpoint_, std::chrono::seconds(30));
  c.hello();
  server_->request_stop();  // the worker goes away, socket and all
  thread_.join();
  const auto t0 = Clock::now();
  try {
    c.embed({protocol::Input{"anyone?", {}}});
    ADD_FAILURE() << "a reply from a stopped worker";
  } catch (const client::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("heartbeat"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));  // 300 ms of liveness, not 30 s
}

}  // namespace
}  // namespace rwkvd::test
