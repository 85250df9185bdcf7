#include "worker/sessions.h"

#include <algorithm>
#include <string>

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

Sessions::Sessions(engine::Backend& backend, SlotPool& slots)
    : backend_(backend), slots_(slots), key_(std::stoull(protocol::random_hex(8), nullptr, 16)) {}

Session& Sessions::open(std::optional<std::vector<float>> state) {
  auto s = std::make_unique<Session>();
  // Ids are not guessable (a bijective mix of a counter with a random key) and stay below 2^53
  // so that every client language holds them exactly.
  do {
    uint64_t z = key_ + ++counter_ * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    s->id = (z ^ (z >> 31)) & ((uint64_t{1} << 53) - 1);
  } while (s->id == 0 || map_.count(s->id) != 0);
  if (state) {
    s->where = Session::Where::kHost;
    s->host = std::move(*state);
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

void Sessions::close(uint64_t id) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  if (it->second->where == Session::Where::kSlot) slots_.release(it->second->slot);
  map_.erase(it);
}

bool Sessions::evict_one() {
  Session* victim = nullptr;
  for (auto& [id, s] : map_) {
    if (s->where != Session::Where::kSlot || s->busy) continue;
    if (victim == nullptr || s->last_used < victim->last_used) victim = s.get();
  }
  if (victim == nullptr) return false;
  victim->host.resize(backend_.hparams().state_floats());
  backend_.read_state(victim->slot, victim->host);
  slots_.release(victim->slot);
  victim->where = Session::Where::kHost;
  return true;
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
  auto slot = acquire_slot();
  s.busy = was_busy;
  if (!slot) return false;
  if (s.where == Session::Where::kHost) {
    backend_.write_state(*slot, s.host);
    s.host.clear();
    s.host.shrink_to_fit();
  } else {
    backend_.reset_state(*slot);
  }
  s.slot = *slot;
  s.where = Session::Where::kSlot;
  return true;
}

Session& Sessions::fork(Session& src) {
  Session& dst = open(std::nullopt);
  dst.position = src.position;
  if (src.where == Session::Where::kSlot) {
    const bool was_busy = src.busy;
    src.busy = true;
    auto slot = acquire_slot();
    src.busy = was_busy;
    if (slot && src.where == Session::Where::kSlot) {
      backend_.copy_state(src.slot, *slot);
      dst.slot = *slot;
      dst.where = Session::Where::kSlot;
      return dst;
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
  return dst;
}

std::vector<float> Sessions::read_state(Session& s) {
  std::vector<float> out(backend_.hparams().state_floats(), 0.0f);
  if (s.where == Session::Where::kSlot) backend_.read_state(s.slot, out);
  if (s.where == Session::Where::kHost) out = s.host;
  return out;
}

void Sessions::write_state(Session& s, std::span<const float> state) {
  if (s.where == Session::Where::kSlot) {
    backend_.write_state(s.slot, state);
  } else {
    s.host.assign(state.begin(), state.end());
    s.where = Session::Where::kHost;
  }
  s.position = 0;
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
