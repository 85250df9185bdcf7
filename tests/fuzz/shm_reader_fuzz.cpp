// Fuzzes what a client does with a ring segment and a reply's tensor descriptor: the header and
// slot table checked against the mapped size (RingView), the descriptor parsed (parse_tensor)
// and resolved to floats (tensor_floats). Whatever is accepted is read in full, so ASan sees any
// offset or length that reaches outside the mapping.
// Input: 2 bytes (little-endian): bits 0-14 the region length, bit 15 "the worker agrees" (the
// harness writes the descriptor's lease into its slot entry, as a buggy or hostile worker would,
// so that mutations reach the bounds arithmetic instead of stopping at the currency check);
// then the region (the "mapped segment"), then a msgpack tensor descriptor.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "protocol/codec.h"
#include "protocol/ring_view.h"

using namespace rwkvd::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t region = (data[0] | (size_t{data[1]} << 8)) & 0x7fff;
  const bool agree = (data[1] & 0x80) != 0;
  data += 2;
  size -= 2;
  if (region > size) region = size;
  // An exactly sized, aligned heap copy: ASan flags any read past its end.
  std::unique_ptr<uint64_t[]> mem(new uint64_t[(region + 7) / 8]);
  char* base = reinterpret_cast<char*>(mem.get());
  if (region > 0) std::memcpy(base, data, region);
  const std::string_view desc_bytes(reinterpret_cast<const char*>(data) + region, size - region);

  std::unique_ptr<RingView> view;
  try {
    view = std::make_unique<RingView>(base, region);
  } catch (const ProtocolError&) {
  }
  try {
    const Value v = decode(desc_bytes);
    const TensorDesc d = parse_tensor(v);
    if (agree && view && d.shm && d.shm->slot < view->header().n_slots) {
      const RingSlot s{d.shm->lease, d.shm->generation, 1, d.shm->offset, d.shm->bytes};
      std::memcpy(base + sizeof(RingHeader) + uint64_t{d.shm->slot} * sizeof(RingSlot), &s,
                  sizeof s);  // in the region: RingView checked the table fits
    }
    const auto floats = tensor_floats(d, view.get());
    if (floats.size() != d.numel()) std::abort();
    // Touch every byte the client would read (a float sum would hide nothing from ASan).
    volatile unsigned char sink = 0;
    const auto* p = reinterpret_cast<const unsigned char*>(floats.data());
    for (size_t i = 0; i < floats.size_bytes(); ++i) sink = sink ^ p[i];
    (void)sink;
  } catch (const ProtocolError&) {
  }
  return 0;
}
