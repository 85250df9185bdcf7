#include "worker/sessions.h"

#include <sys/random.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "protocol/messages.h"
#include "protocol/shm_ring.h"

namespace rwkvd::worker {

SlotPool::SlotPool(uint32_t n) : size_(n) {
  for (uint32_t i = n; i-- > 0;) free_.push_back(i);
}

std::optional<uint32_t> SlotPool::acquire() {
  if (free_.empty()) return std::nullopt;
  const uint32_t s = free_.back();
  free_.pop_back();
  return s;
}

void SlotPool::release(uint32_t slot) {
  free_.push_back(slot);
}

Sessions::Sessions(engine::Backend& backend, SlotPool& slots, uint32_t max_per_owner)
    : backend_(backend), slots_(slots), max_per_owner_(max_per_owner) {}

Session& Sessions::open(const std::string& owner, std::optional<std::vector<float>> state) {
  const auto it = per_owner_.find(owner);
  if ((it == per_owner_.end() ? 0 : it->second) >= max_per_owner_) {
    throw protocol::ProtocolError(protocol::ErrorCode::kQuotaExceeded,
                                  "this client already holds " + std::to_string(max_per_owner_) +
                                      " sessions (--max-sessions-per-client); close some");
  }
  auto s = std::make_unique<Session>();
  // Ids come from the kernel's CSPRNG: knowing your own ids tells nothing of the next (a mixed
  // counter could be inverted). Below 2^53 so that every client language holds them exactly.
  do {
    uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
      throw std::runtime_error("getrandom failed");
    }
    s->id = r & ((uint64_t{1} << 53) - 1);
  } while (s->id == 0 || map_.count(s->id) != 0);
  s->owner = owner;
  per_owner_[owner] += 1;
  if (state) {
    s->where = Session::Where::kHost;
    s->host = std::move(*state);
    s->client_state = true;
  }
  s->last_used = std::chrono::steady_clock::now();
  auto& ref = *s;
  map_.emplace(s->id, std::move(s));
  return ref;
}

Session* Sessions::find(uint64_t id) {
  auto it = map_.find(id);
  return it == map_.end() ? nullptr : it->second.get();
}

Session* Sessions::find_owned(uint64_t id, const std::string& owner) {
  Session* s = find(id);
  return s != nullptr && s->owner == owner && !s->orphaned ? s : nullptr;
}

const std::string& Sessions::share(Session& s) {
  // Idempotent: a session has one capability at a time, so revoking it (unshare, close) is
  // one act however often it was shared.
  if (s.share_token.empty()) {
    std::string token;
    do {
      token = protocol::random_hex(protocol::kShareTokenBytes);
    } while (shared_.count(token) != 0);
    shared_.emplace(token, s.id);
    s.share_token = std::move(token);
  }
  return s.share_token;
}

void Sessions::unshare(Session& s) {
  if (s.share_token.empty()) return;
  shared_.erase(s.share_token);
  s.share_token.clear();
}

Session* Sessions::find_shared(const std::string& token) {
  const auto it = shared_.find(token);
  if (it == shared_.end()) return nullptr;
  Session* s = find(it->second);
  // An orphaned session (its owner is gone, a task still runs on it) is as good as closed.
  return s != nullptr && !s->orphaned ? s : nullptr;
}

void Sessions::close(uint64_t id) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  if (it->second->where == Session::Where::kSlot) slots_.release(it->second->slot);
  unshare(*it->second);  // the token dies with its session
  auto held = per_owner_.find(it->second->owner);
  if (held != per_owner_.end() && --held->second == 0) per_owner_.erase(held);
  map_.erase(it);
}

size_t Sessions::close_owner(const std::string& owner) {
  std::vector<uint64_t> idle;
  for (auto& [id, s] : map_) {
    if (s->owner != owner) continue;
    if (s->busy) {
      s->orphaned = true;
    } else {
      idle.push_back(id);
    }
  }
  for (uint64_t id : idle) close(id);
  return idle.size();
}

bool Sessions::evict_one() {
  Session* victim = nullptr;
  for (auto& [id, s] : map_) {
    if (s->where != Session::Where::kSlot || s->busy) continue;
    if (victim == nullptr || s->last_used < victim->last_used) victim = s.get();
  }
  if (victim == nullptr) return false;
  evict(*victim);
  return true;
}

void Sessions::evict(Session& s) {
  if (s.where != Session::Where::kSlot) return;
  s.host.resize(backend_.hparams().state_floats());
  backend_.read_state(s.slot, s.host);
  slots_.release(s.slot);
  s.where = Session::Where::kHost;
}

std::optional<uint32_t> Sessions::acquire_slot() {
  if (auto s = slots_.acquire()) return s;
  if (evict_one()) return slots_.acquire();
  return std::nullopt;
}

bool Sessions::make_resident(Session& s) {
  s.last_used = std::chrono::steady_clock::now();
  if (s.where == Session::Where::kSlot) return true;
  const bool was_busy = s.busy;
  s.busy = true;  // not its own eviction victim
  std::optional<uint32_t> slot;
  try {
    slot = acquire_slot();  // may evict another session: a state read that can fail
  } catch (...) {
    s.busy = was_busy;  // else it would look busy forever and never run again
    throw;
  }
  s.busy = was_busy;
  if (!slot) return false;
  try {
    if (s.where == Session::Where::kHost) {
      backend_.write_state(*slot, s.host);
    } else {
      backend_.reset_state(*slot);
    }
  } catch (...) {
    slots_.release(*slot);  // the session stays where it was; the slot must not leak
    throw;
  }
  if (s.where == Session::Where::kHost) {
    s.host.clear();
    s.host.shrink_to_fit();
  }
  s.slot = *slot;
  s.where = Session::Where::kSlot;
  return true;
}

Session& Sessions::fork(Session& src, const std::string& owner) {
  Session& dst = open(owner, std::nullopt);
  src.last_used = std::chrono::steady_clock::now();
  dst.position = src.position;
  dst.deferred = src.deferred;
  dst.client_state = src.client_state;
  try {
    copy_into(src, dst);
  } catch (...) {
    close(dst.id);  // a failed copy leaves no half-made session (or its slot) behind
    throw;
  }
  return dst;
}

void Sessions::copy_into(Session& src, Session& dst) {
  // A host-held source (a session opened with a state) goes to a slot first: one upload and
  // then copies on the device, rather than a host copy per fork and an upload per fork when it
  // runs (2.9B: 21.5 MB each; an agent forks its document's state per field). Where no slot
  // can be had, or the upload fails (the source then stays as it was), the fork is a host copy.
  if (src.where == Session::Where::kHost) {
    try {
      make_resident(src);
    } catch (const std::exception&) {
    }
  }
  if (src.where == Session::Where::kSlot) {
    const bool was_busy = src.busy;
    src.busy = true;
    std::optional<uint32_t> slot;
    try {
      slot = acquire_slot();
    } catch (...) {
      src.busy = was_busy;
      throw;
    }
    src.busy = was_busy;
    if (slot && src.where == Session::Where::kSlot) {
      dst.slot = *slot;  // owned by dst first, so close(dst) frees it if the copy throws
      dst.where = Session::Where::kSlot;
      backend_.copy_state(src.slot, *slot);
      return;
    }
    if (slot) slots_.release(*slot);
  }
  if (src.where == Session::Where::kHost) {
    dst.host = src.host;
    dst.where = Session::Where::kHost;
  } else if (src.where == Session::Where::kSlot) {
    dst.host.resize(backend_.hparams().state_floats());
    backend_.read_state(src.slot, dst.host);
    dst.where = Session::Where::kHost;
  }
}

void Sessions::read_state(Session& s, std::span<float> out) {
  if (s.where == Session::Where::kSlot) {
    backend_.read_state(s.slot, out);
  } else if (s.where == Session::Where::kHost) {
    std::copy(s.host.begin(), s.host.end(), out.begin());
  } else {
    std::fill(out.begin(), out.end(), 0.0f);
  }
}

void Sessions::write_state(Session& s, std::span<const float> state) {
  if (s.where == Session::Where::kSlot) {
    backend_.write_state(s.slot, state);
  } else {
    s.host.assign(state.begin(), state.end());
    s.where = Session::Where::kHost;
  }
  s.position = 0;
  s.deferred = -1;
  s.client_state = true;
}

size_t Sessions::reap_idle(std::chrono::steady_clock::time_point now, std::chrono::seconds idle) {
  std::vector<uint64_t> dead;
  for (auto& [id, s] : map_) {
    if (!s->busy && now - s->last_used > idle) dead.push_back(id);
  }
  for (uint64_t id : dead) close(id);
  return dead.size();
}

}  // namespace rwkvd::worker
