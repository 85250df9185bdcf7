#include "protocol/ring_view.h"

#include <cstring>
#include <string>

namespace rwkvd::protocol {
namespace {

[[noreturn]] void bad(const std::string& msg) {
  throw ProtocolError(ErrorCode::kBadValue, msg);
}

// a + b <= limit without wrapping.
bool fits(uint64_t a, uint64_t b, uint64_t limit) {
  return a <= limit && b <= limit - a;
}

}  // namespace

RingView::RingView(const char* base, uint64_t size) : base_(base), size_(size), header_{} {
  if (base == nullptr || size < sizeof(RingHeader)) bad("segment smaller than a ring header");
  if (reinterpret_cast<uintptr_t>(base) % alignof(RingHeader) != 0) bad("segment misaligned");
  std::memcpy(&header_, base, sizeof(RingHeader));
  const RingHeader& h = header_;
  if (std::memcmp(h.magic, kRingMagic, sizeof(kRingMagic)) != 0) bad("not an rwkvd ring");
  if (h.version != kRingVersion) bad("ring version " + std::to_string(h.version));
  if (h.header_bytes != sizeof(RingHeader) || h.slot_bytes != sizeof(RingSlot)) {
    bad("ring header or slot size differs from v1");
  }
  if (h.total_bytes > size) bad("ring claims more bytes than are mapped");
  const uint64_t table_end = sizeof(RingHeader) + uint64_t{h.n_slots} * sizeof(RingSlot);
  if (h.n_slots == 0 || table_end > h.data_offset) bad("ring slot table overlaps its data");
  if (!fits(h.data_offset, h.data_bytes, h.total_bytes)) bad("ring data area outside the segment");
}

bool RingView::current(const ShmRef& ref) const {
  if (ref.slot >= header_.n_slots) return false;
  RingSlot s;
  // memcpy: the worker may be rewriting this entry; we compare a snapshot, never a torn pointer.
  std::memcpy(&s, base_ + sizeof(RingHeader) + uint64_t{ref.slot} * sizeof(RingSlot), sizeof s);
  return s.state == 1 && s.lease == ref.lease && s.generation == ref.generation &&
         s.offset == ref.offset && s.bytes == ref.bytes;
}

std::span<const float> RingView::resolve(const ShmRef& ref) const {
  const RingHeader& h = header_;
  if (ref.offset < h.data_offset || !fits(ref.offset, ref.bytes, h.data_offset + h.data_bytes) ||
      ref.offset % alignof(float) != 0 || ref.bytes % sizeof(float) != 0) {
    bad("shm reference [" + std::to_string(ref.offset) + ", +" + std::to_string(ref.bytes) +
        ") outside the ring's data area");
  }
  if (!current(ref)) {
    throw ProtocolError(ErrorCode::kUnknownLease,
                        "shm lease " + std::to_string(ref.lease) + " is no longer current");
  }
  return {reinterpret_cast<const float*>(base_ + ref.offset), ref.bytes / sizeof(float)};
}

std::span<const float> tensor_floats(const TensorDesc& desc, const RingView* ring) {
  const uint64_t n = desc.numel();
  std::span<const float> out;
  if (desc.shm) {
    if (ring == nullptr) bad("a shared-memory tensor, but the ring is not mapped");
    out = ring->resolve(*desc.shm);
  } else if (desc.data != nullptr) {
    if (reinterpret_cast<uintptr_t>(desc.data->data()) % alignof(float) != 0) {
      bad("inline tensor bytes misaligned");  // never from std::string's allocator
    }
    out = {reinterpret_cast<const float*>(desc.data->data()), desc.data->size() / sizeof(float)};
  } else {
    bad("tensor without data");
  }
  if (out.size() != n) bad("tensor shape does not match its bytes");
  return out;
}

}  // namespace rwkvd::protocol
