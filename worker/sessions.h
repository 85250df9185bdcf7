#pragma once
// Backend state slots and the sessions that hold them. A session's state lives in a slot while
// it is in use and may be moved out to host memory (evicted, least recently used first) when a
// slot is needed elsewhere, so there can be more sessions than slots. Each session belongs to
// the client that opened it: another client's id is as unknown as a closed one, and a client
// may hold only so many. An owner may share one: its share token lets any client fork it for as
// long as it stays open (PROTOCOL.md, "Sharing a session"). Engine thread only.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"

namespace rwkvd::worker {

class SlotPool {
 public:
  explicit SlotPool(uint32_t n);
  std::optional<uint32_t> acquire();
  void release(uint32_t slot);
  uint32_t used() const { return size_ - static_cast<uint32_t>(free_.size()); }
  uint32_t size() const { return size_; }

 private:
  uint32_t size_;
  std::vector<uint32_t> free_;
};

struct Session {
  enum class Where { kZero, kHost, kSlot };
  uint64_t id = 0;
  std::string owner;        // the client's routing identity
  std::string share_token;  // what session_share gave out (Sessions::share); empty: not shared
  bool orphaned = false;    // its client is gone: close it once the running task lets go
  Where where = Where::kZero;
  uint32_t slot = 0;          // valid when where == kSlot
  std::vector<float> host;    // valid when where == kHost
  bool busy = false;          // a compute task is running on it
  uint64_t position = 0;      // tokens consumed since open (or since set_state)
  bool client_state = false;  // its state came from a client (open or set_state), or a fork's
  // A generate's last token, counted in `position` but not yet in the state: the session's next
  // compute feeds it first, in its own forward (which saves the generate a forward of its own);
  // reading the state settles it, a fork inherits it, set_state drops it. -1: none.
  int32_t deferred = -1;
  std::chrono::steady_clock::time_point last_used;
};

class Sessions {
 public:
  Sessions(engine::Backend& backend, SlotPool& slots, uint32_t max_per_owner);

  // Throws ProtocolError(kQuotaExceeded) when the owner already holds max_per_owner sessions.
  Session& open(const std::string& owner, std::optional<std::vector<float>> state);
  // Any session, whoever owns it (the scheduler's own bookkeeping).
  Session* find(uint64_t id);
  // The session if `owner` holds it, else nullptr: a client cannot tell another's from none.
  Session* find_owned(uint64_t id, const std::string& owner);
  void close(uint64_t id);
  // The owner is gone: closes its idle sessions now and marks busy ones orphaned (the scheduler
  // closes those when their task ends). Returns how many were closed now.
  size_t close_owner(const std::string& owner);
  // A new session of `owner` (src's or, through a share token, another client) with a copy of
  // src's state (copy_state when both are resident), its position and its deferred token;
  // `owner`'s quota applies. A fork is a use of src: it restarts src's idle clock.
  Session& fork(Session& src, const std::string& owner);
  // The session's share token, made on its first share: 128 bits from the kernel's CSPRNG (as
  // the ring's name has), so a token cannot be guessed. The same token until unshare or close.
  const std::string& share(Session& s);
  // Revokes the session's token (if any); forks made with it stay.
  void unshare(Session& s);
  // The session `token` shares, whoever owns it; nullptr for a token never made, revoked, of a
  // closed session or of an owner found gone: a caller cannot tell these apart.
  Session* find_shared(const std::string& token);
  // Puts the session's state in a slot; may evict others. False when no slot can be freed.
  bool make_resident(Session& s);
  // Moves the session's state out of its slot into host memory (nothing where it has none);
  // busy or not: the scheduler preempts a running task's session so (Scheduler::share_slots).
  void evict(Session& s);
  // A free slot, evicting an idle session if needed; nullopt when all are busy.
  std::optional<uint32_t> acquire_slot();
  // The session's state into `out` (state_floats), from its slot or from host memory.
  void read_state(Session& s, std::span<float> out);
  void write_state(Session& s, std::span<const float> state);
  // Closes sessions idle for longer than `idle`; returns how many.
  size_t reap_idle(std::chrono::steady_clock::time_point now, std::chrono::seconds idle);
  size_t size() const { return map_.size(); }

 private:
  bool evict_one();
  void copy_into(Session& src, Session& dst);
  engine::Backend& backend_;
  SlotPool& slots_;
  std::unordered_map<uint64_t, std::unique_ptr<Session>> map_;
  std::unordered_map<std::string, uint32_t> per_owner_;
  std::unordered_map<std::string, uint64_t> shared_;  // share token -> session id
  uint32_t max_per_owner_;
};

}  // namespace rwkvd::worker
