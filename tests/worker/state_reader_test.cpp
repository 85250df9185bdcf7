// StateReader (worker/state_reader.h): reads what requests name on its threads, reports each read
// once, with the error a bad input gets, and wakes its owner for each.
#include "worker/state_reader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "protocol/shm_input.h"

namespace rwkvd::worker {
namespace {

protocol::Request naming(const protocol::ShmInput& in, uint64_t id) {
  protocol::Request r;
  r.id = id;
  r.op = protocol::Op::kSessionOpen;
  r.state_shm = protocol::Request::ShmInputRef{in.name(), in.bytes()};
  return r;
}

TEST(StateReader, ReadsEachStateOnceAndReportsBadOnes) {
  std::vector<float> data(300'000);
  std::iota(data.begin(), data.end(), 0.5f);
  std::atomic<int> wakes{0};
  auto reader_owner = std::make_unique<StateReader>(2, [&] { ++wakes; });
  StateReader& reader = *reader_owner;
  std::vector<protocol::ShmInput> inputs;
  for (int i = 0; i < 5; ++i) inputs.emplace_back(std::as_bytes(std::span(data)));
  for (uint64_t i = 0; i < inputs.size(); ++i) {
    reader.submit("client" + std::to_string(i), naming(inputs[i], i + 1));
  }
  protocol::Request missing;
  missing.id = 99;
  missing.state_shm =
      protocol::Request::ShmInputRef{std::string(protocol::kShmInputPrefix) + "1-0", 8};
  reader.submit("other", missing);
  reader.drain();
  const std::vector<StateReader::Done> done = reader.take();
  ASSERT_EQ(done.size(), 6u);
  int good = 0;
  for (const StateReader::Done& d : done) {
    if (d.req.id == 99) {
      EXPECT_EQ(d.client, "other");
      ASSERT_TRUE(d.error.has_value());
      EXPECT_EQ(*d.error, protocol::ErrorCode::kBadState);
      EXPECT_FALSE(d.message.empty());
      continue;
    }
    ++good;
    EXPECT_EQ(d.client, "client" + std::to_string(d.req.id - 1));
    EXPECT_FALSE(d.error.has_value()) << d.message;
    ASSERT_TRUE(d.req.state.has_value());
    EXPECT_EQ(*d.req.state, data);
    EXPECT_FALSE(d.req.state_shm.has_value()) << "read: no longer named";
  }
  EXPECT_EQ(good, 5);
  EXPECT_TRUE(reader.take().empty()) << "each read reported once";
  // A wake follows each read's report (drain() may return before the last one's): all are in
  // once the threads are joined.
  reader_owner.reset();
  EXPECT_EQ(wakes.load(), 6);
}

// Reads still queued when the reader goes are done, not dropped: their clients get replies.
TEST(StateReader, FinishesQueuedReadsWhenDestroyed) {
  std::vector<float> data(1000, 1.0f);
  std::vector<protocol::ShmInput> inputs;
  for (int i = 0; i < 8; ++i) inputs.emplace_back(std::as_bytes(std::span(data)));
  std::atomic<int> wakes{0};
  {
    StateReader reader(1, [&] { ++wakes; });
    for (uint64_t i = 0; i < inputs.size(); ++i) reader.submit("c", naming(inputs[i], i));
  }
  EXPECT_EQ(wakes.load(), 8);
}

}  // namespace
}  // namespace rwkvd::worker
