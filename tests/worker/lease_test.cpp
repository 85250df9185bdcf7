// Leases of the C++ client's Tensors (PROTOCOL.md, "Shared-memory ring"): a Tensor that views
// the ring keeps its bytes for as long as it lives, past the lease timeout and across many
// later results on a small ring; destroying it gives its space back.
#include <thread>

#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::Input;
const char* const kTiny = kTinyWorkerModel;

uint64_t shm_gauge(client::Client& c, const char* name) {
  const protocol::Value stats = c.stats();
  return stats.find("shm")->find(name)->as_uint();
}

uint64_t shm_event(client::Client& c, const char* name) {
  const protocol::Value stats = c.stats();
  const protocol::Value* n = stats.find("shm")->find("events")->find(name);
  return n != nullptr ? n->as_uint() : 0;
}

TEST_F(WorkerTest, ATensorKeepsItsBytesUntilItIsDestroyed) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.shm_bytes = 1u << 20;  // a handful of states
  opt.lease_timeout_s = 1;
  start(model, opt);
  auto c = connect();
  const uint64_t session = c->session_open();
  c->session_feed(session, Input{"a state worth keeping", {}});
  std::optional<client::Tensor> kept = c->session_state(session);
  std::optional<client::Tensor> emb = c->embed({Input{"an embedding too", {}}});
  ASSERT_TRUE(kept->in_shared_memory() && emb->in_shared_memory());
  ASSERT_LT(kept->numel() * sizeof(float) * 4, opt.shm_bytes);  // room for it and more
  const std::vector<float> want(kept->data().begin(), kept->data().end());
  const std::vector<float> want_emb(emb->data().begin(), emb->data().end());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the timeout and a check
  const uint64_t in_use = shm_gauge(*c, "bytes_in_use");
  for (int i = 0; i < 200; ++i) {  // each dropped at once: the ring is reused over and over
    c->session_feed(session, Input{std::to_string(i), {}});
    const client::Tensor t = c->session_state(session);
    ASSERT_TRUE(t.in_shared_memory());
  }
  EXPECT_TRUE(std::equal(want.begin(), want.end(), kept->data().begin()));
  EXPECT_TRUE(std::equal(want_emb.begin(), want_emb.end(), emb->data().begin()));
  EXPECT_GE(shm_event(*c, "owner_checks"), 1u);
  // Destroying the Tensors releases their leases (with the next request): the space is free.
  kept.reset();
  emb.reset();
  c->flush_releases();
  EXPECT_LT(shm_gauge(*c, "bytes_in_use"), in_use);
  EXPECT_EQ(shm_gauge(*c, "leases"), 0u);
}

TEST_F(WorkerTest, ATensorThatOutlivesItsClientKeepsItsBytesAndFreesTheRing) {
  RWKVD_FIXTURE(model, kTiny);
  worker::ServeOptions opt;
  opt.shm_bytes = 1u << 20;
  start(model, opt);
  std::optional<client::Tensor> kept;
  std::vector<float> want;
  auto watcher = connect();
  {
    auto c = connect();
    const uint64_t session = c->session_open();
    c->session_feed(session, Input{"outlives its client", {}});
    kept = c->session_state(session);
    ASSERT_TRUE(kept->in_shared_memory());
    want.assign(kept->data().begin(), kept->data().end());
    EXPECT_EQ(shm_gauge(*watcher, "leases"), 1u);
  }
  // The destructor handed the lease back (not waited for): the space is the others' now.
  ASSERT_TRUE(eventually([&] { return shm_gauge(*watcher, "leases") == 0; }));
  const uint64_t session = watcher->session_open();
  for (int i = 0; i < 50; ++i) {
    watcher->session_feed(session, Input{"overwrite " + std::to_string(i), {}});
    const client::Tensor t = watcher->session_state(session);
    ASSERT_TRUE(t.in_shared_memory());
  }
  EXPECT_TRUE(std::equal(want.begin(), want.end(), kept->data().begin()));
}

}  // namespace
}  // namespace rwkvd::test
