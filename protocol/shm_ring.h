#pragma once
// The shared-memory ring through which the worker hands result tensors to local clients without
// a copy through the socket (PROTOCOL.md, "Shared-memory ring"). One POSIX segment per worker,
// mode 0600, named rwkvd-<uid>-<pid>-<32 random hex digits>. It starts with a 64-byte header and a
// slot table; the data area follows, page aligned. The worker is the only writer: it allocates a
// slot per result tensor, and the client that got the lease reads it in place (mapped read-only)
// and releases it. A lease is reference-counted (retain/release) and lives until its client
// releases it or is gone: time never takes back a lease of a client that is still there (its
// data would change under it); the lease timeout only says when the worker asks whether the
// owner still is (owners_to_check). Every slot reuse bumps the slot's generation so a stale
// reference is detectable. The geometry (offsets, sizes, generations) lives in this object, never
// read back from the shared header, which any process of the user can write; a truncated object
// (SIGBUS on access) is caught by a BusGuard and replaced (damaged(), recreate()). The methods
// are thread-safe: the worker's engine thread writes large results straight into leases it takes
// while the server thread takes, renews and frees others.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "protocol/messages.h"

namespace rwkvd::protocol {

inline constexpr char kRingMagic[8] = {'R', 'W', 'K', 'V', 'D', 'S', 'H', 'M'};
inline constexpr uint32_t kRingVersion = 1;
inline constexpr uint64_t kRingAlign = 64;  // every tensor starts on a cache line

// Little-endian, at offset 0 of the segment.
struct RingHeader {
  char magic[8];          // "RWKVDSHM"
  uint32_t version;       // kRingVersion
  uint32_t header_bytes;  // sizeof(RingHeader)
  uint64_t total_bytes;   // size of the segment
  uint64_t data_offset;   // start of the data area (page aligned)
  uint64_t data_bytes;    // size of the data area
  uint32_t n_slots;       // entries in the slot table (at offset header_bytes)
  uint32_t slot_bytes;    // sizeof(RingSlot)
  uint32_t pid;           // the worker's pid
  uint32_t reserved[3];
};
static_assert(sizeof(RingHeader) == 64);

struct RingSlot {
  uint64_t lease;       // 0 when free
  uint32_t generation;  // bumped each time the slot is allocated
  uint32_t state;       // 0 free, 1 leased
  uint64_t offset;      // bytes from the start of the segment
  uint64_t bytes;
};
static_assert(sizeof(RingSlot) == 32);

class ShmRing {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    uint64_t bytes = 64u << 20;  // whole segment
    uint32_t n_slots = 256;
    std::chrono::milliseconds lease_timeout{std::chrono::minutes(2)};
  };
  struct Allocation {
    ShmRef ref;
    float* data;
  };

  // Creates (and reserves the memory of) a fresh segment; throws std::runtime_error.
  static std::unique_ptr<ShmRing> create(const Options& options);
  ~ShmRing();  // unmaps and unlinks
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  // The segment's name; it changes when recreate() makes a new one (server thread only).
  const std::string& name() const { return name_; }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t data_bytes() const { return data_bytes_; }
  uint32_t n_slots() const { return n_slots_; }

  // A lease of `bytes` for `owner` (the client's identity), with refcount 1; nullopt when no slot
  // or no contiguous space is free now (the caller waits briefly or goes inline).
  std::optional<Allocation> allocate(uint64_t bytes, const std::string& owner,
                                     Clock::time_point now = Clock::now());
  // Drop one reference; frees the slot at zero. False for an unknown lease or another owner.
  bool release(uint64_t lease, const std::string& owner);
  // Add one reference and renew the timeout. False for an unknown lease or another owner.
  bool retain(uint64_t lease, const std::string& owner, Clock::time_point now = Clock::now());
  // The owners of leases held past the lease timeout, each once; their leases' timeouts start
  // over. Nothing is freed: the caller finds out whether each owner is still there and frees
  // the leases of one that is gone (release_owner).
  std::vector<std::string> owners_to_check(Clock::time_point now = Clock::now());
  // Frees every lease of an owner (a client known to be gone).
  size_t release_owner(const std::string& owner);

  // The segment was truncated under us: some access faulted (and got a private page instead,
  // BusGuard) or it is now smaller than its mapping.
  bool damaged() const;
  // Replaces a damaged segment with a fresh one of the same geometry and a new name, dropping
  // every lease (their bytes are gone with the old object); returns how many. The old mapping
  // stays (unlinked) until this ring goes: another thread may still be writing into it.
  // Throws std::runtime_error when the new segment cannot be made (the old one stays in use).
  size_t recreate();

  uint64_t bytes_in_use() const;
  uint32_t leases_in_use() const;
  // Leases one owner holds now (the worker caps them per client).
  uint32_t leases_of(const std::string& owner) const;

  // The name prefix of this user's segments: "rwkvd-<uid>-".
  static std::string user_prefix();
  // Unlinks segments of this user whose worker pid is dead; returns how many.
  static size_t remove_stale();

 private:
  struct Live {
    uint32_t slot;
    uint32_t refs;
    uint64_t offset;
    uint64_t bytes;  // aligned size
    std::string owner;
    Clock::time_point deadline;
  };
  ShmRing() = default;
  std::optional<uint64_t> find_space(uint64_t bytes) const;
  void free_live(std::map<uint64_t, Live>::iterator it);
  // A new segment of opt_'s geometry, its header written, and no leases (under mu_ or alone).
  void map_fresh();

  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::vector<std::unique_ptr<Mapping>> retired_;  // replaced by recreate(), still mapped
  std::string name_;
  mutable std::mutex mu_;  // guards what follows (leases, slots, cursor, the mapping)
  // The geometry, written to the shared header for clients but never read back from it.
  uint64_t total_bytes_ = 0;
  uint64_t data_offset_ = 0;
  uint64_t data_bytes_ = 0;
  uint32_t n_slots_ = 0;
  std::vector<uint32_t> generations_;  // per slot
  RingSlot* slots_ = nullptr;
  char* base_ = nullptr;
  Options opt_;
  std::map<uint64_t, Live> live_;              // lease -> allocation
  std::map<uint64_t, uint64_t> by_offset_;     // offset -> lease, for finding free space
  std::map<std::string, uint32_t> per_owner_;  // owner -> leases held
  std::vector<uint32_t> free_slots_;
  uint64_t cursor_ = 0;  // next-fit: where the last allocation ended (relative to data area)
  uint64_t bytes_in_use_ = 0;
};

class RingView;

// The client side: maps a worker's segment read-only and resolves ShmRefs to memory through a
// RingView (ring_view.h), which checks every bound against the size actually mapped.
class ShmReader {
 public:
  // Throws ProtocolError(kBadValue) if the segment is missing or its header is not a ring.
  // A thread then maps the ring's pages into this process (populate()), so that tensors landing
  // on pages this client has not read yet cost no page faults.
  static std::unique_ptr<ShmReader> open(const std::string& name);
  ~ShmReader();
  ShmReader(const ShmReader&) = delete;
  ShmReader& operator=(const ShmReader&) = delete;

  const RingHeader& header() const;
  const RingView& view() const { return *view_; }
  // The tensor's bytes, after checking bounds and that the slot still holds this lease and
  // generation; throws ProtocolError (kBadValue out of bounds, kUnknownLease if not current).
  const float* resolve(const ShmRef& ref) const;
  bool current(const ShmRef& ref) const;
  // Throws ProtocolError(kUnknownLease) when the object is now smaller than the mapping
  // (another process truncated it: reading there would be a SIGBUS; the worker replaces it).
  void check_intact() const;
  // Replaces the pages under [offset, offset + bytes) of this mapping with a private, read-only
  // copy of them, in one step (a thread reading them meanwhile sees the same bytes throughout):
  // what a client's arrays there show stays, whatever the worker later writes. For a client
  // that goes while results it got still live. False for a range outside the mapping or where
  // the system refuses.
  bool detach(uint64_t offset, uint64_t bytes);
  // False once the worker that created the segment has exited (its pid is gone): a client
  // that still holds this mapping is talking to a restarted worker and must say hello again.
  bool worker_alive() const;

 private:
  ShmReader() = default;
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::unique_ptr<RingView> view_;
  std::jthread populate_;  // last: stopped and joined before the mapping goes
};

// 16 random bytes from /dev/urandom as 32 hex digits (segment names, lease keys).
std::string random_hex(size_t n_bytes = 16);
// Whether every character of s is a digit random_hex() writes (0-9, a-f).
bool is_random_hex(std::string_view s);

// Removes the POSIX shared-memory objects of this user (regular files in /dev/shm) for which
// pid_of(name) gives a pid that is gone; names it gives 0 for are left alone. The stale sweep
// of ring segments (ShmRing::remove_stale) and of request inputs (shm_input.h). Returns how many.
size_t remove_objects_of_dead_pids(const std::function<long(std::string_view)>& pid_of);

}  // namespace rwkvd::protocol
