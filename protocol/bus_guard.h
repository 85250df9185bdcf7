#pragma once
// A shared-memory object that another process truncates (any process of the same user may)
// takes the pages behind it away: the next access to them is a SIGBUS, which would kill the
// whole worker. A BusGuard turns such a fault on the mapping it covers into a private, zero-filled
// page mapped in place (the access then completes, its data lands nowhere shared) and a count,
// so that the owner of the mapping sees faults() > 0 and replaces the object. Faults outside
// every guarded mapping keep their usual effect (the previous SIGBUS disposition).
#include <cstddef>
#include <cstdint>

namespace rwkvd::protocol {

class BusGuard {
 public:
  // Guards [base, base + size) (page aligned). Throws std::runtime_error when too many
  // mappings are guarded at once.
  BusGuard(void* base, size_t size);
  ~BusGuard();  // stops guarding (before the mapping goes)
  BusGuard(const BusGuard&) = delete;
  BusGuard& operator=(const BusGuard&) = delete;

  // SIGBUS faults on the mapping turned into private pages so far.
  uint64_t faults() const;

 private:
  size_t index_;
};

}  // namespace rwkvd::protocol
