// Fair scheduling among clients: one client that fills every slot with long generations does
// not starve another's embed, generate or session feed (its tasks yield their slots), and the
// tasks that yield resume exactly where they stopped.
#include "tests/worker/raw_dealer.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::Input;

const char* const kTiny = kTinyWorkerModel;

uint64_t generate_steps(client::Client& c) {
  return c.stats().find("generate")->find("steps")->as_uint();
}

// A raw DEALER that pipelines long greedy generations and reads their replies later.
class Flood : public RawDealer {
 public:
  using RawDealer::RawDealer;
  static std::vector<int32_t> prompt(uint64_t id) {
    return {static_cast<int32_t>(id % 256), 7, static_cast<int32_t>(3 * id % 256)};
  }
  void send_generates(uint64_t n, uint32_t max_tokens) {
    for (uint64_t id = 1; id <= n; ++id) {
      protocol::Request r;
      r.id = id;
      r.op = protocol::Op::kGenerate;
      r.inputs.push_back(Input{std::nullopt, prompt(id)});
      r.sampling.max_tokens = max_tokens;
      r.sampling.temperature = 0;
      send(r);
    }
  }
  void cancel(uint64_t target) {
    protocol::Request c;
    c.id = 1000 + target;
    c.op = protocol::Op::kCancel;
    c.target = target;
    send(c);
  }
  // The next reply (not a heartbeat), within 30 s.
  std::optional<protocol::Reply> next() { return RawDealer::next(true); }
};

TEST_F(WorkerTest, FloodingClientDoesNotStarveOthers) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 0;  // the flood's replies are all real ones
  start(model, opt);
  auto victim = connect();
  Flood flood(endpoint_);
  // Twice the slots, each far longer than anything the victim asks for.
  flood.send_generates(16, 16000);
  ASSERT_TRUE(eventually([&] { return slots_used(*victim) == 8; }));
  const uint64_t steps0 = generate_steps(*victim);
  // Before fair scheduling each of these waited for a flood generation to end (16000 steps).
  const auto e = victim->embed({Input{"an embed", {}}});
  EXPECT_EQ(e.numel(), static_cast<uint64_t>(ref_->hparams().n_embd));
  client::GenerateOptions o;
  o.sampling.max_tokens = 8;
  o.sampling.temperature = 0;
  const auto g = victim->generate(Input{"a generate", {}}, o);
  EXPECT_EQ(g.tokens.size(), 8u);
  const uint64_t s = victim->session_open();
  EXPECT_EQ(victim->session_feed(s, Input{"a session feed", {}}), 14u);
  // Bounded: the victim's 8 tokens, its prompts' chunks and a feed, not the flood's length.
  const uint64_t steps = generate_steps(*victim) - steps0;
  EXPECT_LT(steps, 200u);
  EXPECT_FALSE(flood.has_reply()) << "a flood generation ended: the bound above proves nothing";
  EXPECT_GT(victim->stats().find("generate")->find("preemptions")->as_uint(), 0u);
  // The flood's generations, preempted and resumed, give what they give alone.
  for (uint64_t id = 1; id <= 16; ++id) flood.cancel(id);
  engine::SamplingParams greedy;
  greedy.temperature = 0;
  int generations = 0;
  for (int i = 0; i < 32; ++i) {
    const auto rep = flood.next();
    ASSERT_TRUE(rep.has_value());
    ASSERT_TRUE(rep->ok) << rep->message;
    if (rep->id > 16) continue;  // a cancel's answer
    ++generations;
    EXPECT_EQ(rep->body.find("finish_reason")->as_str(), "cancelled");
    std::vector<int32_t> got;
    for (const auto& t : rep->body.find("tokens")->as_array()) {
      got.push_back(static_cast<int32_t>(t.as_uint()));
    }
    // Enough to tell a wrong state from the right one, without regenerating thousands.
    got.resize(std::min<size_t>(got.size(), 64));
    engine::Sampler sampler(greedy);
    EXPECT_EQ(got, ref_generate(Flood::prompt(rep->id), sampler, static_cast<int>(got.size())))
        << "generation " << rep->id;
  }
  EXPECT_EQ(generations, 16);
}

// Many sequences decode in one step: 256 generations at once (one client's pipelined requests,
// as a batch job sends them) share each step once all have their slots, and each still gives what
// it gives alone.
TEST_F(WorkerTest, TwoHundredFiftySixGenerationsDecodeInOneStep) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 0;
  slots_ = 256;
  start(model, opt);
  auto probe = connect();
  Flood flood(endpoint_);
  constexpr uint64_t kMany = 256;
  constexpr uint32_t kTokens =
      48;  // long enough that the first are still running when the last join
  flood.send_generates(kMany, kTokens);
  engine::SamplingParams greedy;
  greedy.temperature = 0;
  for (uint64_t i = 0; i < kMany; ++i) {
    const auto rep = flood.next();
    ASSERT_TRUE(rep.has_value()) << i << " replies";
    ASSERT_TRUE(rep->ok) << rep->message;
    std::vector<int32_t> got;
    for (const auto& t : rep->body.find("tokens")->as_array()) {
      got.push_back(static_cast<int32_t>(t.as_uint()));
    }
    ASSERT_EQ(got.size(), kTokens);
    if (rep->id % 37 == 0) {  // a few against the reference (each costs a generation alone)
      engine::Sampler sampler(greedy);
      EXPECT_EQ(got, ref_generate(Flood::prompt(rep->id), sampler, kTokens)) << rep->id;
    }
  }
  const protocol::Value st = probe->stats();
  EXPECT_EQ(st.find("generate")->find("batch_sequences")->find("max")->as_uint(), kMany);
}

// PROTOCOL.md: a cancelled generate ends with finish_reason cancelled, also one that never got
// a slot (it used to fail with the error cancelled).
TEST_F(WorkerTest, AGenerateCancelledBeforeItStartsEndsWithFinishReasonCancelled) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.heartbeat_ms = 0;
  start(model, opt);
  auto probe = connect();
  Flood flood(endpoint_);
  flood.send_generates(10, 16000);  // 8 slots: 9 and 10 wait
  ASSERT_TRUE(eventually([&] { return slots_used(*probe) == 8; }));
  flood.cancel(10);
  for (int i = 0; i < 2; ++i) {
    const auto rep = flood.next();
    ASSERT_TRUE(rep.has_value());
    ASSERT_TRUE(rep->ok) << rep->message;
    if (rep->id != 10) continue;  // the cancel's answer
    EXPECT_EQ(rep->body.find("finish_reason")->as_str(), "cancelled");
    EXPECT_TRUE(rep->body.find("tokens")->as_array().empty());
    EXPECT_EQ(rep->body.find("completion_tokens")->as_uint(), 0u);
  }
}

TEST_F(WorkerTest, MoreClientsThanSlotsTakeTurnsWithoutChangingResults) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.fair_quantum_steps = 2;  // a turn every other step: many preemptions
  opt.prefix_cache_bytes = 0;
  start(model, opt);
  constexpr int kClients = 12;  // 8 slots
  constexpr int kTokens = 40;
  std::vector<client::GenerateResult> got(kClients);
  std::vector<std::vector<float>> fed(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  auto prompt = [](int i) { return "client " + std::to_string(i) + " says"; };
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = connect();
      c->hello();
      ready++;
      while (ready.load() < kClients) std::this_thread::yield();
      client::GenerateOptions o;
      o.sampling.max_tokens = kTokens;
      o.sampling.temperature = 0.8f;
      o.sampling.seed = 100 + i;
      if (i % 3 == 0) {  // on a session: the session's state is what yields
        const uint64_t s = c->session_open();
        got[i] = c->generate(Input{prompt(i), {}}, o, {}, s);
        const auto st = c->session_state(s);
        fed[i].assign(st.data().begin(), st.data().end());
      } else {
        o.return_state = true;
        got[i] = c->generate(Input{prompt(i), {}}, o);
        fed[i].assign(got[i].state->data().begin(), got[i].state->data().end());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto c = connect();
  EXPECT_GT(c->stats().find("generate")->find("preemptions")->as_uint(), 0u);
  for (int i = 0; i < kClients; ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    engine::SamplingParams p;
    p.temperature = 0.8f;
    p.seed = 100 + i;
    engine::Sampler sampler(p);
    const auto toks = ByteCodec().encode(prompt(i));
    EXPECT_EQ(got[i].tokens, ref_generate(toks, sampler, kTokens));
    // A session defers its last token to its next compute; session_state settles it.
    expect_near(fed[i], ref_state(), 1e-4f);
  }
}

}  // namespace
}  // namespace rwkvd::test
