// What a client that does not read its replies costs the worker is bounded in bytes as well as
// in messages: a reply that would take its queue past --client-queue-bytes is dropped for an
// error with its id, and stats clients.stalled counts clients that stop reading, not replies.
#include "tests/worker/raw_dealer.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::ErrorCode;

const char* const kTiny = kTinyWorkerModel;

// A raw DEALER that asks for a session's state over and over, inline (the tiny model's 264 KiB:
// large replies that cost the engine no compute), and reads none of the answers until told.
class Unread : public RawDealer {
 public:
  // Little held on this side (a receive queue of one, a small kernel buffer): the worker's queue
  // fills.
  explicit Unread(const std::string& endpoint) : RawDealer(endpoint, 1, 4096) {
    protocol::Request open;
    open.id = 1;
    open.op = protocol::Op::kSessionOpen;
    send(open);
    session_ = next()->body.find("session")->as_uint();
  }
  void send_state_reads(uint64_t first, uint64_t n) {
    for (uint64_t id = first; id < first + n; ++id) {
      protocol::Request r;
      r.id = id;
      r.op = protocol::Op::kSessionState;
      r.session = session_;
      send(r);
    }
  }

 private:
  uint64_t session_ = 0;
};

uint64_t states_answered(client::Client& c) {
  const protocol::Value stats = c.stats();
  const protocol::Value* f = stats.find("latency_ms")->find("session_state");
  return f != nullptr ? f->find("count")->as_uint() : 0;
}

TEST_F(WorkerTest, AClientThatDoesNotReadCostsBoundedBytes) {
  RWKVD_FIXTURE(model, kTiny);
  const uint64_t reply_bytes =
      engine::Rwkv7Model::load(model.string())->hparams().state_floats() * sizeof(float);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 0;
  opt.client_queue_bytes = 4 * reply_bytes;
  start(model, opt);
  auto other = connect();
  Unread unread(endpoint_);
  // 30 of them: more than the socket buffers between us and the worker hold, and the cap.
  unread.send_state_reads(2, 30);
  ASSERT_TRUE(eventually([&] { return states_answered(*other) == 30; }));
  EXPECT_LE(other->stats().find("reply_queue_bytes")->as_uint(),
            opt.client_queue_bytes + 2 * reply_bytes);
  // The others are served meanwhile.
  EXPECT_EQ(other->tokenize("ok").size(), 2u);
  // Every request has one answer: the state, or an error saying why it was dropped.
  std::set<uint64_t> ids;
  int ok = 0, dropped = 0;
  for (int i = 0; i < 30; ++i) {
    const auto rep = unread.next();
    ASSERT_TRUE(rep.has_value());
    ids.insert(rep->id);
    if (rep->ok) {
      ++ok;
    } else {
      EXPECT_EQ(rep->code, ErrorCode::kQuotaExceeded);
      EXPECT_NE(rep->message.find("client-queue-bytes"), std::string::npos) << rep->message;
      ++dropped;
    }
  }
  EXPECT_EQ(ids.size(), 30u);
  EXPECT_GE(ok, 1);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(stats_count(*other, "clients", "replies_dropped"), static_cast<uint64_t>(dropped));
}

TEST_F(WorkerTest, StalledCountsClientsThatStopReadingNotTheirReplies) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 0;
  opt.client_queue = 20;  // not 2: ZeroMQ counts a pipe's reads lazily, and others' replies
  opt.client_queue_bytes = uint64_t{1} << 40;  // the message count is what fills
  start(model, opt);
  auto other = connect();
  Unread unread(endpoint_);
  auto settled = [&](uint64_t requests) {
    return eventually([&] {
      return stats_count(*other, "requests", "session_state") == requests &&
             other->stats().find("queue_depth")->as_uint() == 0;
    });
  };
  // Its buffers fill (the worker may find it stalled more than once while they do: a queue that
  // empties meanwhile was read from).
  unread.send_state_reads(2, 60);
  ASSERT_TRUE(eventually([&] { return stats_count(*other, "clients", "stalled") >= 1; }));
  ASSERT_TRUE(settled(60));
  const uint64_t stalls = stats_count(*other, "clients", "stalled");
  // It goes on sending without reading: every reply fails again, and it is still one stalled
  // client (before, each failed reply counted).
  unread.send_state_reads(100, 30);
  ASSERT_TRUE(settled(90));
  EXPECT_EQ(stats_count(*other, "clients", "stalled"), stalls);
}

}  // namespace
}  // namespace rwkvd::test
