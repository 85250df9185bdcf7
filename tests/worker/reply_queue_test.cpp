// What a client that does not read its replies costs the worker is bounded in bytes as well as
// in messages: a reply that would take its queue past --client-queue-bytes is dropped for an
// error with its id, and stats clients.stalled counts clients that stop reading, not replies.
#include <zmq.hpp>

#include "protocol/codec.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::ErrorCode;
using protocol::Input;

const char* const kTiny = kTinyWorkerModel;

// A raw DEALER that sends forwards whose replies are 64 KiB of logits, inline.
class Unread {
 public:
  explicit Unread(const std::string& endpoint) : s_(ctx_, zmq::socket_type::dealer) {
    s_.set(zmq::sockopt::linger, 0);
    s_.set(zmq::sockopt::rcvhwm, 1);  // little held on this side: the worker's queue fills
    s_.set(zmq::sockopt::rcvbuf, 4096);
    s_.connect(endpoint);
  }
  void send_forwards(uint64_t first, uint64_t n) {
    for (uint64_t id = first; id < first + n; ++id) {
      protocol::Request r;
      r.id = id;
      r.op = protocol::Op::kForward;
      r.output = protocol::Output::kAllLogits;
      r.inputs.push_back(Input{std::nullopt, std::vector<int32_t>(64, 65)});
      const std::string bytes = protocol::encode_request(r);
      s_.send(zmq::buffer(bytes), zmq::send_flags::none);
    }
  }
  std::optional<protocol::Reply> next() {
    zmq::pollitem_t item{s_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::seconds(10));
    if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
    zmq::message_t m;
    (void)s_.recv(m);
    return protocol::decode_reply(m.to_string_view());
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t s_;
};

uint64_t forwards_answered(client::Client& c) {
  const protocol::Value stats = c.stats();
  const protocol::Value* f = stats.find("latency_ms")->find("forward");
  return f != nullptr ? f->find("count")->as_uint() : 0;
}

TEST_F(WorkerTest, AClientThatDoesNotReadCostsBoundedBytes) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 0;
  opt.client_queue_bytes = 256u << 10;  // four replies
  start(model, opt);
  auto other = connect();
  Unread unread(endpoint_);
  unread.send_forwards(1, 30);  // 1.9 MiB of replies
  ASSERT_TRUE(eventually([&] { return forwards_answered(*other) == 30; }));
  const uint64_t reply_bytes = 64u * 256u * 4u;
  EXPECT_LE(other->stats().find("reply_queue_bytes")->as_uint(), (256u << 10) + 2 * reply_bytes);
  // The others are served meanwhile.
  EXPECT_EQ(other->tokenize("ok").size(), 2u);
  // Every request has one answer: its logits, or an error saying why they were dropped.
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
  opt.client_queue = 2;
  opt.client_queue_bytes = uint64_t{1} << 40;  // the message count is what fills
  start(model, opt);
  auto other = connect();
  Unread unread(endpoint_);
  unread.send_forwards(1, 20);
  ASSERT_TRUE(eventually([&] { return other->stats().find("queue_depth")->as_uint() == 0; }));
  ASSERT_TRUE(eventually([&] { return stats_count(*other, "clients", "stalled") == 1; }));
  // It goes on sending without reading: every reply fails again, the count stays one client.
  unread.send_forwards(100, 20);
  ASSERT_TRUE(eventually([&] { return stats_count(*other, "requests", "forward") == 40; }));
  ASSERT_TRUE(eventually([&] { return other->stats().find("queue_depth")->as_uint() == 0; }));
  EXPECT_EQ(stats_count(*other, "clients", "stalled"), 1u);
}

}  // namespace
}  // namespace rwkvd::test
