// Sharing a session by token (PROTOCOL.md, "Sharing a session"): another client forks the shared
// session into a session of its own, the token dies with the session (closed, unshared, its
// owner gone) and then answers like one never made, and the fork path is the same-client one
// (quota, deferred token).
#include <zmq.hpp>

#include "protocol/codec.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::ErrorCode;
using protocol::Input;

const char* const kTiny = kTinyWorkerModel;
const std::string kDocumentText = "A short document about the weather.";
const Input kDocument{kDocumentText, {}};

std::vector<float> floats(const client::Tensor& t) {
  return {t.data().begin(), t.data().end()};
}

// The worker's session count, once the engine thread has published it (it may do so just after
// the reply that changed it).
uint64_t sessions_settled(client::Client& c, uint64_t want) {
  uint64_t n = 0;
  eventually([&] { return (n = c.stats().find("sessions")->as_uint()) == want; });
  return n;
}

// A token of the right form that no session_share gave out.
std::string made_up_token() {
  return protocol::random_hex(protocol::kShareTokenBytes);
}

// A client on a bare DEALER socket, as the clients are underneath: it can leave while a request
// of its is still running, which is how the worker finds a client gone.
class BareClient {
 public:
  BareClient(zmq::context_t& ctx, const std::string& endpoint)
      : sock_(ctx, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.connect(endpoint);
  }
  void send(protocol::Request req) {
    req.id = next_id_++;
    const std::string bytes = protocol::encode_request(req);
    sock_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  protocol::Reply call(protocol::Request req) {
    send(std::move(req));
    for (;;) {
      zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::seconds(10));
      if (!(item.revents & ZMQ_POLLIN)) throw std::runtime_error("no reply");
      zmq::message_t m;
      (void)sock_.recv(m);
      protocol::Reply r = protocol::decode_reply(m.to_string_view());
      if (!r.heartbeat) return r;
    }
  }
  void leave() { sock_.close(); }

 private:
  zmq::socket_t sock_;
  uint64_t next_id_ = 1;
};

TEST_F(WorkerTest, AnotherClientForksASharedSessionIntoOneOfItsOwn) {
  RWKVD_FIXTURE(model, kTiny);
  start(model);
  auto owner = connect();
  auto other = connect();
  const uint64_t doc = owner->session_open();
  owner->session_feed(doc, kDocument);
  const std::string token = owner->session_share(doc);
  EXPECT_TRUE(protocol::is_share_token(token)) << "32 lower-case hex digits";
  EXPECT_EQ(owner->session_share(doc), token) << "sharing again gives the same token";
  // Only the owner shares, and the token does not open the session by id to anyone else.
  EXPECT_EQ(code_of([&] { other->session_share(doc); }), ErrorCode::kUnknownSession);
  EXPECT_EQ(code_of([&] { other->session_unshare(doc); }), ErrorCode::kUnknownSession);
  EXPECT_EQ(code_of([&] { other->session_state(doc); }), ErrorCode::kUnknownSession);

  const uint64_t fork = other->session_fork_shared(token);
  const std::vector<float> shared = floats(owner->session_state(doc));
  expect_near(floats(other->session_state(fork)), shared, 0.0f);
  // The fork is the forker's: its owner uses it, the shared session's owner cannot touch it.
  EXPECT_EQ(code_of([&] { owner->session_state(fork); }), ErrorCode::kUnknownSession);
  EXPECT_EQ(code_of([&] {
              owner->session_feed(fork, Input{"x", {}});
            }),
            ErrorCode::kUnknownSession);
  EXPECT_EQ(code_of([&] { owner->session_close(fork); }), ErrorCode::kUnknownSession);
  other->session_feed(fork, Input{" More.", {}});
  EXPECT_EQ(sessions_settled(*owner, 2), 2u);

  // The owner keeps control: what it feeds later, later forks see; earlier forks are copies.
  owner->session_feed(doc, Input{" Later.", {}});
  const std::vector<float> later = floats(owner->session_state(doc));
  const uint64_t fork2 = other->session_fork_shared(token);
  expect_near(floats(other->session_state(fork2)), later, 0.0f);
  ref_run(ByteCodec().encode(kDocumentText + " Later."), engine::OutputMode::kNone);
  expect_near(later, ref_state(), 1e-4f);
  ref_run(ByteCodec().encode(kDocumentText + " More."), engine::OutputMode::kNone);
  expect_near(floats(other->session_state(fork)), ref_state(), 1e-4f);
  other->session_close(fork);
  other->session_close(fork2);
  owner->session_close(doc);
}

TEST_F(WorkerTest, ATokenDiesWithItsSessionAndAnswersLikeOneNeverMade) {
  RWKVD_FIXTURE(model, kTiny);
  start(model);
  auto owner = connect();
  auto other = connect();
  EXPECT_EQ(code_of([&] { other->session_fork_shared(made_up_token()); }),
            ErrorCode::kUnknownSession);
  const uint64_t doc = owner->session_open();
  owner->session_feed(doc, kDocument);
  const std::string token = owner->session_share(doc);
  const uint64_t fork = other->session_fork_shared(token);
  const std::vector<float> before = floats(other->session_state(fork));

  // Unsharing revokes the token; sharing again makes a new one.
  owner->session_unshare(doc);
  EXPECT_EQ(code_of([&] { other->session_fork_shared(token); }), ErrorCode::kUnknownSession);
  const std::string again = owner->session_share(doc);
  EXPECT_NE(again, token);
  EXPECT_EQ(code_of([&] { other->session_fork_shared(token); }), ErrorCode::kUnknownSession);
  other->session_close(other->session_fork_shared(again));

  // Closing the session kills its token; the forks made with it stay.
  owner->session_close(doc);
  EXPECT_EQ(code_of([&] { other->session_fork_shared(again); }), ErrorCode::kUnknownSession);
  EXPECT_EQ(code_of([&] { owner->session_fork_shared(again); }), ErrorCode::kUnknownSession);
  expect_near(floats(other->session_state(fork)), before, 0.0f);
  other->session_close(fork);
}

TEST_F(WorkerTest, ATokenDiesWhenItsOwnerIsFoundGone) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 20;  // a heartbeat to the gone owner finds it gone soon
  start(model, opt);
  auto other = connect();
  zmq::context_t ctx(1);
  BareClient owner(ctx, endpoint_);
  protocol::Request open;
  open.op = protocol::Op::kSessionOpen;
  const protocol::Reply opened = owner.call(open);
  ASSERT_TRUE(opened.ok);
  protocol::Request share;
  share.op = protocol::Op::kSessionShare;
  share.session = opened.body.find("session")->as_uint();
  const protocol::Reply shared = owner.call(share);
  ASSERT_TRUE(shared.ok);
  const std::string token = shared.body.find("token")->as_str();
  const uint64_t fork = other->session_fork_shared(token);

  // The owner leaves with a long generation running: the worker cannot reach it any more.
  protocol::Request gen;
  gen.op = protocol::Op::kGenerate;
  gen.inputs.push_back(Input{std::nullopt, {1, 2, 3}});
  gen.sampling.max_tokens = 16000;
  owner.send(gen);
  owner.leave();
  auto gone = [&] { return stats_count(*other, "clients", "gone"); };
  eventually([&] { return gone() != 0; });
  ASSERT_EQ(gone(), 1u);
  EXPECT_EQ(code_of([&] { other->session_fork_shared(token); }), ErrorCode::kUnknownSession);
  EXPECT_NO_THROW(other->session_state(fork)) << "a fork made before stays";
  other->session_close(fork);
}

TEST_F(WorkerTest, AForkNamesItsSourceBySessionOrByTokenNotBoth) {
  RWKVD_FIXTURE(model, kTiny);
  start(model);
  auto c = connect();
  const uint64_t doc = c->session_open();
  const std::string token = c->session_share(doc);
  protocol::Request both;
  both.op = protocol::Op::kSessionFork;
  both.session = doc;
  both.token = token;
  EXPECT_EQ(code_of([&] { c->call(both); }), ErrorCode::kBadValue);
  protocol::Request neither;
  neither.op = protocol::Op::kSessionFork;
  EXPECT_EQ(code_of([&] { c->call(neither); }), ErrorCode::kMissingField);
  const std::vector<std::string> malformed = {
      "", "xyz", token.substr(1), token + "0", std::string(32, 'A'), std::string(32, 'g')};
  for (const std::string& bad : malformed) {
    EXPECT_EQ(code_of([&] { c->session_fork_shared(bad); }), ErrorCode::kBadValue) << bad;
  }
  EXPECT_EQ(sessions_settled(*c, 1), 1u) << "nothing was forked";
  // The owner may fork its own session by its token too; the worker still serves.
  c->session_close(c->session_fork_shared(token));
  c->session_close(doc);
}

TEST_F(WorkerTest, AForkByTokenCountsAgainstTheForkersSessionCap) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.max_sessions_per_client = 2;
  start(model, opt);
  auto owner = connect();
  auto other = connect();
  const uint64_t doc = owner->session_open();
  const std::string token = owner->session_share(doc);
  const uint64_t mine = other->session_open();
  const uint64_t fork = other->session_fork_shared(token);
  EXPECT_EQ(code_of([&] { other->session_fork_shared(token); }), ErrorCode::kQuotaExceeded);
  // The owner's cap is untouched by the other's forks: it holds 1 of 2.
  const uint64_t second = owner->session_open();
  EXPECT_EQ(code_of([&] { owner->session_open(); }), ErrorCode::kQuotaExceeded);
  other->session_close(mine);
  EXPECT_NO_THROW(other->session_close(other->session_fork_shared(token)));
  other->session_close(fork);
  owner->session_close(second);
  owner->session_close(doc);
}

// A session generate leaves its last token to the session's next compute (Session::deferred); a
// fork by token inherits it exactly as a fork by id does.
TEST_F(WorkerTest, AForkByTokenOfAGeneratedSessionEqualsAForkById) {
  RWKVD_FIXTURE(model, kTiny);
  start(model);
  auto owner = connect();
  auto other = connect();
  const uint64_t doc = owner->session_open();
  owner->session_feed(doc, kDocument);
  client::GenerateOptions g;
  g.sampling.max_tokens = 6;
  g.sampling.temperature = 0;
  const std::vector<int32_t> gen = owner->generate(Input{" Subject:", {}}, g, {}, doc).tokens;
  ASSERT_EQ(gen.size(), 6u);
  const std::string token = owner->session_share(doc);
  const uint64_t by_token = other->session_fork_shared(token);
  const uint64_t by_id = owner->session_fork(doc);
  const std::vector<float> state_by_token = floats(other->session_state(by_token));
  expect_near(state_by_token, floats(owner->session_state(by_id)), 0.0f);
  std::vector<int32_t> all = ByteCodec().encode(kDocumentText + " Subject:");
  all.insert(all.end(), gen.begin(), gen.end());
  ref_run(all, engine::OutputMode::kNone);
  expect_near(state_by_token, ref_state(), 1e-4f);
  EXPECT_EQ(other->session_feed(by_token, Input{"!", {}}), all.size() + 1);
  EXPECT_EQ(owner->session_feed(by_id, Input{"!", {}}), all.size() + 1);
  other->session_close(by_token);
  owner->session_close(by_id);
  owner->session_close(doc);
}

}  // namespace
}  // namespace rwkvd::test
