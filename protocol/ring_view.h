#pragma once
// The client's reading of a shared-memory ring: the header and slot table checked against the
// size actually mapped, and each ShmRef from a reply checked against the data area before any
// byte behind it is touched. A reply is untrusted input (a buggy or foreign worker, a stale
// mapping), so every sum is overflow-checked. ShmReader wraps this around a real mapping; the
// fuzz target tests/fuzz/shm_reader_fuzz.cpp feeds it arbitrary bytes.
#include <cstdint>
#include <span>

#include "protocol/messages.h"
#include "protocol/shm_ring.h"

namespace rwkvd::protocol {

class RingView {
 public:
  // `base` must be 4-byte aligned (a mapping is page aligned). Throws ProtocolError(kBadValue)
  // unless [base, base + size) starts with a v1 ring header whose slot table and data area lie
  // inside it. The header is copied: later writes to the segment cannot move the bounds.
  RingView(const char* base, uint64_t size);

  const RingHeader& header() const { return header_; }
  const char* base() const { return base_; }
  uint64_t size() const { return size_; }

  // The slot entry still shows this lease, generation, offset and size.
  bool current(const ShmRef& ref) const;
  // The tensor's floats after checking bounds, alignment and currency: ProtocolError(kBadValue)
  // for a reference outside the data area, kUnknownLease for one no longer current.
  std::span<const float> resolve(const ShmRef& ref) const;

 private:
  const char* base_;
  uint64_t size_;
  RingHeader header_;
};

// The floats of a parsed tensor descriptor: its shm range (resolved in `ring`, which may be null
// when the client has no mapping) or its inline bytes. Checks that the element count matches
// the bytes. Inline data is returned as a view of the descriptor's Value (copy it to keep it).
std::span<const float> tensor_floats(const TensorDesc& desc, const RingView* ring);

}  // namespace rwkvd::protocol
