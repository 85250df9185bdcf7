// What a client accepts from a ring segment and a reply's tensor descriptor (RingView,
// parse_tensor, tensor_floats). Each case is a shape of bad input the fuzz target
// tests/fuzz/shm_reader_fuzz.cpp exercises; the overflow ones were real bugs (offset + bytes
// and the shape's element count wrapped past the checks).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

#include "protocol/codec.h"
#include "protocol/ring_view.h"

namespace rwkvd::protocol {
namespace {

// A ring image: header, `n` slots, then `data` bytes, with slot 0 leased at [data_offset, +16).
struct Image {
  std::vector<uint64_t> mem;  // 8-byte aligned storage
  RingHeader* h() { return reinterpret_cast<RingHeader*>(mem.data()); }
  RingSlot* slot(uint32_t i) {
    return reinterpret_cast<RingSlot*>(reinterpret_cast<char*>(mem.data()) + 64 + 32 * i);
  }
  const char* base() const { return reinterpret_cast<const char*>(mem.data()); }
  uint64_t size() const { return mem.size() * 8; }
};

Image image(uint32_t n = 4, uint64_t data = 256) {
  Image im;
  const uint64_t off = 64 + 32 * n;
  im.mem.assign((off + data) / 8, 0);
  std::memcpy(im.h()->magic, kRingMagic, 8);
  im.h()->version = kRingVersion;
  im.h()->header_bytes = 64;
  im.h()->total_bytes = off + data;
  im.h()->data_offset = off;
  im.h()->data_bytes = data;
  im.h()->n_slots = n;
  im.h()->slot_bytes = 32;
  *im.slot(0) = RingSlot{77, 3, 1, off, 16};
  return im;
}

// Slot 0's lease in image() with the default 4 slots.
ShmRef good_ref(const Image&) {
  return ShmRef{77, 0, 3, 64 + 32 * 4, 16};
}

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ProtocolError& e) {
    return e.code();
  }
  ADD_FAILURE() << "accepted";
  return ErrorCode::kInternal;
}

TEST(RingView, AcceptsAGoodRingAndResolvesACurrentLease) {
  Image im = image();
  RingView v(im.base(), im.size());
  const auto f = v.resolve(good_ref(im));
  EXPECT_EQ(f.size(), 4u);
  EXPECT_EQ(reinterpret_cast<const char*>(f.data()), im.base() + 64 + 32 * 4);
}

TEST(RingView, RejectsHeadersThatDoNotFitTheMapping) {
  Image im = image();
  EXPECT_EQ(code_of([&] { RingView(im.base(), 63); }), ErrorCode::kBadValue);
  EXPECT_EQ(code_of([&] { RingView(im.base(), im.size() - 8); }), ErrorCode::kBadValue);
  Image magic = image();
  magic.h()->magic[0] = 'X';
  EXPECT_EQ(code_of([&] { RingView(magic.base(), magic.size()); }), ErrorCode::kBadValue);
  Image slots = image();
  slots.h()->n_slots = 1u << 30;  // slot table runs into (and past) the data area
  EXPECT_EQ(code_of([&] { RingView(slots.base(), slots.size()); }), ErrorCode::kBadValue);
  Image wrap = image();
  wrap.h()->data_bytes = ~uint64_t{0} - 100;  // data_offset + data_bytes wraps
  EXPECT_EQ(code_of([&] { RingView(wrap.base(), wrap.size()); }), ErrorCode::kBadValue);
}

TEST(RingView, RejectsReferencesOutsideTheDataArea) {
  Image im = image();
  RingView v(im.base(), im.size());
  const ShmRef ok = good_ref(im);
  auto with = [&](auto change) {
    ShmRef r = ok;
    change(r);
    return code_of([&] { v.resolve(r); });
  };
  EXPECT_EQ(with([](ShmRef& r) { r.offset = 8; }), ErrorCode::kBadValue);  // in the header
  EXPECT_EQ(with([&](ShmRef& r) { r.offset = im.size(); }), ErrorCode::kBadValue);
  EXPECT_EQ(with([](ShmRef& r) { r.bytes = 1u << 20; }), ErrorCode::kBadValue);
  // offset + bytes wraps to a small number: the old check let this through.
  EXPECT_EQ(with([](ShmRef& r) {
              r.offset = ~uint64_t{0} - 7;
              r.bytes = 16;
            }),
            ErrorCode::kBadValue);
  EXPECT_EQ(with([](ShmRef& r) { r.bytes = 15; }), ErrorCode::kBadValue);
  EXPECT_EQ(with([](ShmRef& r) { r.offset += 2; }), ErrorCode::kBadValue);
  // In bounds but no longer this lease: kUnknownLease, never the bytes.
  EXPECT_EQ(with([](ShmRef& r) { r.generation += 1; }), ErrorCode::kUnknownLease);
  EXPECT_EQ(with([](ShmRef& r) { r.slot = 4; }), ErrorCode::kUnknownLease);
  EXPECT_EQ(with([](ShmRef& r) { r.offset += 16; }), ErrorCode::kUnknownLease);
}

TEST(TensorDesc, ShapeWhoseElementCountWrapsIsRejected) {
  // 4 * (2^62 + 1) wraps to 4: with 4 bytes of data this used to pass, and the client then
  // copied 2^62 + 1 floats.
  Value t(Value::Map{{"dtype", Value("f32")},
                     {"shape", Value(Value::Array{Value((uint64_t{1} << 62) + 1)})},
                     {"data", Value(Value::Bin{std::string(4, '\0')})}});
  EXPECT_EQ(code_of([&] { parse_tensor(t); }), ErrorCode::kTooLarge);
  Value two(
      Value::Map{{"dtype", Value("f32")},
                 {"shape", Value(Value::Array{Value(uint64_t{1} << 32), Value(uint64_t{1} << 30)})},
                 {"data", Value(Value::Bin{std::string()})}});
  EXPECT_EQ(code_of([&] { parse_tensor(two); }), ErrorCode::kTooLarge);
}

TEST(TensorDesc, SlotOrGenerationBeyond32BitsIsRejected) {
  Value shm(Value::Map{{"lease", Value(1)},
                       {"slot", Value((uint64_t{1} << 32) + 1)},  // used to truncate to slot 1
                       {"generation", Value(1)},
                       {"offset", Value(4096)},
                       {"bytes", Value(4)}});
  Value t(
      Value::Map{{"dtype", Value("f32")}, {"shape", Value(Value::Array{Value(1)})}, {"shm", shm}});
  EXPECT_EQ(code_of([&] { parse_tensor(t); }), ErrorCode::kBadValue);
}

TEST(TensorDesc, FloatsNeedAMappingAndAMatchingCount) {
  Image im = image();
  RingView v(im.base(), im.size());
  TensorDesc d;
  d.shape = {4};
  d.shm = good_ref(im);
  EXPECT_EQ(tensor_floats(d, &v).size(), 4u);
  EXPECT_EQ(code_of([&] { tensor_floats(d, nullptr); }), ErrorCode::kBadValue);
  d.shape = {5};
  EXPECT_EQ(code_of([&] { tensor_floats(d, &v); }), ErrorCode::kBadValue);
}

}  // namespace
}  // namespace rwkvd::protocol
