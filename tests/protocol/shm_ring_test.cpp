// The shared-memory ring: header layout, leases, generations, refcounts, timeouts, full ring.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<ShmRing> small_ring(uint32_t slots = 8, uint64_t bytes = 1u << 20) {
  ShmRing::Options o;
  o.bytes = bytes;
  o.n_slots = slots;
  o.lease_timeout = 100ms;
  return ShmRing::create(o);
}

TEST(ShmRing, HeaderLayoutAndMode) {
  auto ring = small_ring();
  const std::string path = "/dev/shm/" + ring->name();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ring->name().rfind(ShmRing::user_prefix(), 0), 0u);
  EXPECT_GE(ring->name().size(), ShmRing::user_prefix().size() + 33);  // pid + 32 hex digits
  auto reader = ShmReader::open(ring->name());
  const RingHeader& h = reader->header();
  EXPECT_EQ(std::memcmp(h.magic, "RWKVDSHM", 8), 0);
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.header_bytes, 64u);
  EXPECT_EQ(h.n_slots, 8u);
  EXPECT_EQ(h.slot_bytes, 32u);
  EXPECT_EQ(h.data_offset % 4096, 0u);
  EXPECT_EQ(h.data_offset + h.data_bytes, h.total_bytes);
  EXPECT_EQ(h.pid, static_cast<uint32_t>(::getpid()));
}

TEST(ShmRing, AllocateWriteReadRelease) {
  auto ring = small_ring();
  auto reader = ShmReader::open(ring->name());
  auto a = ring->allocate(12, "alice");
  ASSERT_TRUE(a);
  a->data[0] = 1.5f;
  a->data[2] = -2.f;
  EXPECT_EQ(a->ref.offset % kRingAlign, 0u);
  const float* p = reader->resolve(a->ref);
  EXPECT_EQ(p[0], 1.5f);
  EXPECT_EQ(p[2], -2.f);
  EXPECT_FALSE(ring->release(a->ref.lease, "bob"));  // not the owner
  EXPECT_TRUE(ring->release(a->ref.lease, "alice"));
  EXPECT_FALSE(ring->release(a->ref.lease, "alice"));  // already gone
  EXPECT_FALSE(reader->current(a->ref));
  EXPECT_THROW(reader->resolve(a->ref), ProtocolError);
  EXPECT_EQ(ring->bytes_in_use(), 0u);
}

// The worker's engine thread takes leases for the states it writes (worker/scheduler.cpp) while
// the server thread takes, releases and checks others: two threads at once, each writing its
// own pattern into its leases, must never share bytes, and every lease comes back.
TEST(ShmRing, TwoThreadsTakeAndReleaseLeases) {
  auto ring = small_ring(16, 1u << 20);
  auto worker = [&](const std::string& owner, float mark, int& clashes) {
    std::vector<ShmRing::Allocation> held;
    for (int i = 0; i < 4000; ++i) {
      if (auto a = ring->allocate(4096 + 64 * (i % 7), owner)) {
        std::fill(a->data, a->data + 1024, mark);
        held.push_back(*a);
      }
      if (held.size() > 3 || (i % 5 == 0 && !held.empty())) {
        const ShmRing::Allocation a = held.front();
        held.erase(held.begin());
        clashes += std::count_if(a.data, a.data + 1024, [&](float v) { return v != mark; });
        if (!ring->release(a.ref.lease, owner)) clashes += 1;
      }
      if (i % 100 == 0) (void)ring->owners_to_check();
    }
    for (const auto& a : held) ring->release(a.ref.lease, owner);
  };
  int clashes_a = 0, clashes_b = 0;
  std::thread a([&] { worker("server", 1.0f, clashes_a); });
  std::thread b([&] { worker("engine", 2.0f, clashes_b); });
  a.join();
  b.join();
  EXPECT_EQ(clashes_a, 0);
  EXPECT_EQ(clashes_b, 0);
  EXPECT_EQ(ring->bytes_in_use(), 0u);
  EXPECT_EQ(ring->leases_in_use(), 0u);
}

TEST(ShmRing, GenerationBumpsOnReuseAndLeasesDiffer) {
  auto ring = small_ring(1);
  auto a = ring->allocate(64, "c");
  ASSERT_TRUE(a);
  EXPECT_FALSE(ring->allocate(64, "c"));  // the only slot is taken
  ring->release(a->ref.lease, "c");
  auto b = ring->allocate(64, "c");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->ref.slot, a->ref.slot);
  EXPECT_EQ(b->ref.generation, a->ref.generation + 1);
  EXPECT_NE(b->ref.lease, a->ref.lease);
  auto reader = ShmReader::open(ring->name());
  EXPECT_FALSE(reader->current(a->ref));
  EXPECT_TRUE(reader->current(b->ref));
}

TEST(ShmRing, RefcountAndOwnersToCheck) {
  auto ring = small_ring();
  auto a = ring->allocate(100, "c");
  ASSERT_TRUE(a);
  EXPECT_TRUE(ring->retain(a->ref.lease, "c"));
  EXPECT_TRUE(ring->release(a->ref.lease, "c"));
  EXPECT_EQ(ring->leases_in_use(), 1u);  // one reference left
  EXPECT_TRUE(ring->release(a->ref.lease, "c"));
  EXPECT_EQ(ring->leases_in_use(), 0u);
  // Time frees nothing: past the timeout the owner is named for a check, once, and its lease
  // stays until the owner releases it or is found gone.
  const auto t0 = ShmRing::Clock::now();
  auto b = ring->allocate(100, "c", t0);
  auto b2 = ring->allocate(100, "c", t0);
  ASSERT_TRUE(b && b2);
  auto reader = ShmReader::open(ring->name());
  EXPECT_TRUE(ring->owners_to_check(t0).empty());
  EXPECT_EQ(ring->owners_to_check(t0 + 1s), std::vector<std::string>{"c"});
  EXPECT_TRUE(ring->owners_to_check(t0 + 1s).empty());  // its timeout started over
  EXPECT_EQ(ring->owners_to_check(t0 + 2s), std::vector<std::string>{"c"});
  EXPECT_EQ(ring->leases_in_use(), 2u);
  EXPECT_TRUE(reader->current(b->ref));
  ASSERT_TRUE(ring->allocate(100, "gone"));
  EXPECT_EQ(ring->release_owner("gone"), 1u);
  EXPECT_EQ(ring->leases_in_use(), 2u);
}

// Any process of the user can write the segment: the ring's own numbers stay in the worker.
TEST(ShmRing, GeometryIsNotReadBackFromTheSharedHeader) {
  auto ring = small_ring(8, 1u << 20);
  const uint64_t data_bytes = ring->data_bytes();
  {
    std::fstream f("/dev/shm/" + ring->name(), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f);
    const std::string garbage(48, '\xff');  // sizes, offsets, slot count, pid
    f.seekp(16);
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    std::string slots(8 * sizeof(RingSlot), '\x7f');  // and the slot table
    f.write(slots.data(), static_cast<std::streamsize>(slots.size()));
  }
  EXPECT_EQ(ring->data_bytes(), data_bytes);
  std::vector<ShmRing::Allocation> held;
  for (int i = 0; i < 64; ++i) {  // every slot reused several times
    auto a = ring->allocate(data_bytes / 4, "c");
    ASSERT_TRUE(a);
    std::fill(a->data, a->data + a->ref.bytes / sizeof(float), static_cast<float>(i));
    EXPECT_GE(a->ref.offset, 4096u);
    EXPECT_LE(a->ref.offset + a->ref.bytes, ring->total_bytes());
    held.push_back(*a);
    if (held.size() == 3) {
      ASSERT_TRUE(ring->release(held.front().ref.lease, "c"));
      held.erase(held.begin());
    }
  }
}

// A truncated segment: the accesses that fault get private pages (the process lives on), the
// ring says it is damaged, and recreate() gives a fresh segment under a new name.
TEST(ShmRing, ATruncatedSegmentIsCaughtAndReplaced) {
  auto ring = small_ring(8, 1u << 20);
  auto a = ring->allocate(64 * 1024, "c");
  ASSERT_TRUE(a);
  EXPECT_FALSE(ring->damaged());
  const std::string old = ring->name();
  auto old_reader = ShmReader::open(old);
  ASSERT_EQ(::truncate(("/dev/shm/" + old).c_str(), 0), 0);
  EXPECT_TRUE(ring->damaged());
  std::fill(a->data, a->data + 16 * 1024, 3.0f);  // would be a SIGBUS
  EXPECT_EQ(a->data[16 * 1024 - 1], 3.0f);
  // A reader still mapping it is told so before it reads there (not a SIGBUS).
  try {
    old_reader->resolve(a->ref);
    ADD_FAILURE() << "resolved a reference into a truncated ring";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnknownLease);
  }
  EXPECT_EQ(ring->recreate(), 1u);
  EXPECT_NE(ring->name(), old);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + old));
  EXPECT_FALSE(ring->damaged());
  EXPECT_EQ(ring->leases_in_use(), 0u);
  EXPECT_FALSE(ring->release(a->ref.lease, "c"));  // lost with the old segment
  auto b = ring->allocate(64 * 1024, "c");
  ASSERT_TRUE(b);
  b->data[0] = 7.0f;
  auto reader = ShmReader::open(ring->name());
  EXPECT_EQ(reader->resolve(b->ref)[0], 7.0f);
}

// Truncated again and again: each time a fresh segment, and the worker lives on.
TEST(ShmRing, RepeatedTruncationsKeepTheRingServing) {
  auto ring = small_ring(8, 1u << 20);
  for (int i = 0; i < 10; ++i) {
    auto a = ring->allocate(64 * 1024, "c");
    ASSERT_TRUE(a);
    ASSERT_EQ(::truncate(("/dev/shm/" + ring->name()).c_str(), 4096), 0);
    ASSERT_TRUE(ring->damaged());
    ring->recreate();
    std::fill(a->data, a->data + 16 * 1024, 1.0f);  // a late write into a replaced segment
  }
  auto b = ring->allocate(64, "c");
  ASSERT_TRUE(b);
  b->data[0] = 2.0f;
  EXPECT_EQ(ShmReader::open(ring->name())->resolve(b->ref)[0], 2.0f);
}

TEST(ShmRing, FullRingAndWrapAround) {
  auto ring = small_ring(64, 64 * 1024);
  const uint64_t cap = ring->data_bytes();
  EXPECT_FALSE(ring->allocate(cap + 1, "c"));  // larger than the ring: the caller goes inline
  std::vector<ShmRing::Allocation> all;
  while (auto a = ring->allocate(cap / 4, "c")) all.push_back(*a);
  EXPECT_EQ(all.size(), 4u);
  EXPECT_FALSE(ring->allocate(64, "c"));
  // Free the second: a new allocation lands in that gap (after wrapping from the end).
  ring->release(all[1].ref.lease, "c");
  auto n = ring->allocate(cap / 4, "c");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->ref.offset, all[1].ref.offset);
}

TEST(ShmRing, UnlinkedOnDestructionAndReaderRejectsForeign) {
  std::string name;
  {
    auto ring = small_ring();
    name = ring->name();
    EXPECT_TRUE(std::filesystem::exists("/dev/shm/" + name));
  }
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name));
  EXPECT_THROW(ShmReader::open(name), ProtocolError);
}

TEST(ShmRing, RemoveStaleKeepsLiveWorkers) {
  auto ring = small_ring();
  ShmRing::remove_stale();  // our own pid is alive: kept
  EXPECT_TRUE(std::filesystem::exists("/dev/shm/" + ring->name()));
}

// Rss (KiB) of this process's mappings of `path` with permissions `perms` ("r--s": a reader's).
uint64_t resident_kib(const std::string& path, const std::string& perms) {
  std::ifstream smaps("/proc/self/smaps");
  uint64_t rss = 0;
  bool current = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream in(line);
    std::string first, second, offset, dev, inode, name;
    in >> first >> second;
    if (first.find('-') != std::string::npos && in >> offset >> dev >> inode) {
      in >> name;
      current = second == perms && name == path;
    } else if (current && first == "Rss:") {
      rss += std::stoull(second);
    }
  }
  return rss;
}

// A reader maps the ring's pages in the background (ShmReader::open): they become resident in its
// mapping without anything reading them.
TEST(ShmRing, ReaderMapsTheRingsPagesInTheBackground) {
  auto ring = small_ring(8, 8u << 20);
  const std::string path = "/dev/shm/" + ring->name();
  auto reader = ShmReader::open(ring->name());
  const uint64_t want = reader->header().total_bytes / 1024;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (resident_kib(path, "r--s") < want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GE(resident_kib(path, "r--s"), want);
}

}  // namespace
}  // namespace rwkvd::protocol
