// Malformed GGUF files: every one must be refused with an EngineError that names the file, the
// key or tensor at fault and what was expected — never a crash, never another exception.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "engine/gguf.h"
#include "tests/support/engine_error.h"
#include "tests/support/gguf_builder.h"

namespace rwkvd::engine {
namespace {

using test::GgufBuilder;
using test::message_has;
namespace enc = test::enc;
namespace vt = test::vt;

constexpr uint64_t kMinus1 = std::numeric_limits<uint64_t>::max();

// A small valid file: a few keys of several types and three tensors of different types.
GgufBuilder valid() {
  GgufBuilder b;
  b.add_string("general.architecture", "test");
  b.add_u32("test.count", 7);
  b.add_f32("test.eps", 1e-5f);
  b.add_kv("test.tokens", vt::ARRAY, enc::str_array({"a", "bc", "\\x00"}));
  b.add_kv("test.types", vt::ARRAY, enc::i32_array({1, 3, 5}));
  b.add_tensor("a", {8, 2}, 0);  // f32, 64 bytes
  b.add_tensor("b", {32}, 8);    // q8_0, 34 bytes
  b.add_tensor("c", {4}, 1);     // f16, 8 bytes
  return b;
}

class GgufCorrupt : public ::testing::Test {
 protected:
  // Writes `b` as bad.gguf and returns the EngineError message from opening it.
  std::string open_error(const GgufBuilder& b) {
    b.write(path());
    return test::engine_error_of([&] { GgufFile::open(path().string()); });
  }
  std::string open_error_bytes(std::string_view bytes) {
    test::write_bytes(path(), bytes);
    return test::engine_error_of([&] { GgufFile::open(path().string()); });
  }
  std::filesystem::path path() const { return dir_ / "bad.gguf"; }
  std::string file() const { return path().string(); }

  test::TempDir dir_;
};

TEST_F(GgufCorrupt, ValidFileOpens) {
  valid().write(path());
  auto f = GgufFile::open(file());
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->get_u32("test.count"), 7u);
  EXPECT_EQ(f->get_array("test.tokens").strings[2], "\\x00");
}

TEST_F(GgufCorrupt, EmptyFile) {
  EXPECT_TRUE(message_has(open_error_bytes(""), {file(), "too short", "magic"}));
}

TEST_F(GgufCorrupt, BadMagic) {
  GgufBuilder b = valid();
  b.magic = 0x46554746;  // "FGUF"
  EXPECT_TRUE(message_has(open_error(b), {file(), "bad magic 0x46554746", "expected \"GGUF\""}));
  EXPECT_TRUE(message_has(open_error_bytes("GGU"), {file(), "too short"}));
}

TEST_F(GgufCorrupt, UnsupportedVersions) {
  for (uint32_t v : {0u, 1u}) {
    GgufBuilder b = valid();
    b.version = v;
    EXPECT_TRUE(message_has(
        open_error(b), {file(), "version " + std::to_string(v), "not supported (v2 and v3 are)"}));
  }
  for (uint32_t v : {4u, 5u, 1000u, 0xffffffffu}) {
    GgufBuilder b = valid();
    b.version = v;
    EXPECT_TRUE(message_has(open_error(b), {file(), "version " + std::to_string(v), "v2 and v3"}));
  }
  GgufBuilder be = valid();
  be.version = 0x03000000;  // v3 written big-endian
  EXPECT_TRUE(message_has(open_error(be), {file(), "big-endian"}));
  GgufBuilder v2 = valid();
  v2.version = 2;  // same layout as v3 for little-endian files
  v2.write(path());
  EXPECT_EQ(GgufFile::open(file())->version(), 2u);
}

TEST_F(GgufCorrupt, CountsMinusOneOrAbsurd) {
  GgufBuilder b = valid();
  b.n_tensors = kMinus1;
  EXPECT_TRUE(message_has(open_error(b),
                          {file(), "tensor count 18446744073709551615", "exceeds the limit"}));
  b = valid();
  b.n_kv = kMinus1;
  EXPECT_TRUE(message_has(open_error(b),
                          {file(), "metadata count 18446744073709551615", "exceeds the limit"}));
  // Within the limits, but more entries than the file holds: what follows the last real entry
  // is read as one and refused.
  b = valid();
  b.n_kv = 1000;
  EXPECT_TRUE(message_has(open_error(b), {file(), "metadata #"}));
  b = valid();
  b.n_tensors = 1000;
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor #"}));
}

// Every prefix of a valid file that cuts into the header or a tensor's data must be refused.
TEST_F(GgufCorrupt, TruncatedAtEveryPrefix) {
  const GgufBuilder b = valid();
  const std::string bytes = b.bytes();
  const auto offsets = b.packed_offsets();
  const uint64_t end_of_data =
      b.data_offset() + offsets.back() + GgufBuilder::tensor_bytes(b.tensors.back());
  ASSERT_LE(end_of_data, bytes.size());
  for (uint64_t n = 0; n < end_of_data; ++n) {
    const std::string msg = open_error_bytes(std::string_view(bytes).substr(0, n));
    ASSERT_TRUE(message_has(msg, {file()})) << "prefix of " << n << " bytes";
    ASSERT_TRUE(message_has(msg, {"trunc"}) || message_has(msg, {"too short"}))
        << "prefix of " << n << " bytes: " << msg;
  }
  // The padding after the last tensor is optional.
  test::write_bytes(path(), std::string_view(bytes).substr(0, end_of_data));
  EXPECT_EQ(GgufFile::open(file())->tensors().size(), 3u);
}

TEST_F(GgufCorrupt, KeyLength) {
  for (uint64_t len : {kMinus1, uint64_t{1} << 40, uint64_t{65537}}) {
    GgufBuilder b = valid();
    b.kv[1].key_len = len;
    EXPECT_TRUE(message_has(open_error(b), {file(), "metadata #1 key length " + std::to_string(len),
                                            "exceeds the limit of 65536 bytes"}));
  }
  GgufBuilder b = valid();
  b.kv[1].key_len = 60000;  // allowed, but past the end of the file
  EXPECT_TRUE(message_has(open_error(b), {file(), "truncated", "metadata #1 key"}));
}

TEST_F(GgufCorrupt, EmptyKey) {
  GgufBuilder b = valid();
  b.kv[2].key = "";
  EXPECT_TRUE(message_has(open_error(b), {file(), "metadata #2: empty key"}));
}

TEST_F(GgufCorrupt, DuplicateKey) {
  GgufBuilder b = valid();
  b.add_u32("test.count", 8);
  EXPECT_TRUE(message_has(open_error(b), {file(), "duplicate metadata key 'test.count'"}));
}

TEST_F(GgufCorrupt, UnknownValueType) {
  for (uint32_t t : {13u, 0xffffffffu}) {
    GgufBuilder b = valid();
    b.key("test.count").type = t;
    EXPECT_TRUE(message_has(
        open_error(b), {file(), "key 'test.count'", "unknown value type " + std::to_string(t)}));
  }
}

TEST_F(GgufCorrupt, BoolNeitherZeroNorOne) {
  GgufBuilder b = valid();
  b.add_kv("test.flag", vt::BOOL, enc::u8(2));
  EXPECT_TRUE(message_has(open_error(b), {file(), "key 'test.flag'", "neither 0 nor 1"}));
}

TEST_F(GgufCorrupt, UnknownArrayElementType) {
  GgufBuilder b = valid();
  b.add_kv("test.arr", vt::ARRAY, enc::array(42, 1, enc::u32(0)));
  EXPECT_TRUE(
      message_has(open_error(b), {file(), "key 'test.arr'", "unknown array element type 42"}));
}

TEST_F(GgufCorrupt, ArraysNestedTooDeep) {
  // Four levels are allowed, five are not.
  auto nested = [](int levels) {
    std::string v = enc::array(vt::U8, 1, enc::u8(1));
    for (int i = 1; i < levels; ++i) v = enc::array(vt::ARRAY, 1, v);
    return v;
  };
  GgufBuilder ok = valid();
  ok.add_kv("test.nested", vt::ARRAY, nested(4));
  ok.write(path());
  EXPECT_NO_THROW(GgufFile::open(file()));
  GgufBuilder b = valid();
  b.add_kv("test.nested", vt::ARRAY, nested(5));
  EXPECT_TRUE(message_has(open_error(b), {file(), "key 'test.nested", "nested deeper than 4"}));
}

TEST_F(GgufCorrupt, StringAndArrayLengthsOfTwoTo63) {
  const uint64_t huge = uint64_t{1} << 63;
  GgufBuilder b = valid();
  b.add_kv("test.s", vt::STRING, enc::str("abc", huge));
  EXPECT_TRUE(message_has(open_error(b), {file(), "truncated", "key 'test.s'",
                                          "needs " + std::to_string(huge) + " bytes"}));
  b = valid();
  b.add_kv("test.a", vt::ARRAY, enc::array(vt::U32, huge, enc::u32(1)));
  EXPECT_TRUE(message_has(
      open_error(b), {file(), "key 'test.a'", "array of " + std::to_string(huge) + " elements"}));
  b = valid();
  b.add_kv("test.sa", vt::ARRAY, enc::array(vt::STRING, huge, enc::str("x")));
  EXPECT_TRUE(message_has(open_error(b), {file(), "key 'test.sa'", "cannot fit"}));
  b = valid();
  b.add_kv("test.aa", vt::ARRAY, enc::array(vt::ARRAY, huge / 2, ""));
  EXPECT_TRUE(message_has(open_error(b), {file(), "key 'test.aa'", "cannot fit"}));
  b = valid();  // one string element of an array with a huge length
  b.add_kv("test.sb", vt::ARRAY, enc::array(vt::STRING, 2, enc::str("x") + enc::str("y", huge)));
  EXPECT_TRUE(message_has(open_error(b), {file(), "truncated", "key 'test.sb'[1]"}));
}

TEST_F(GgufCorrupt, Alignment) {
  for (uint32_t al : {0u, 3u, 48u}) {
    GgufBuilder b = valid();
    b.add_u32("general.alignment", al);
    EXPECT_TRUE(message_has(
        open_error(b), {file(), "'general.alignment'", std::to_string(al), "not a power of two"}));
  }
  GgufBuilder b = valid();
  b.add_kv("general.alignment", vt::U64, enc::u64(32));
  EXPECT_TRUE(
      message_has(open_error(b), {file(), "'general.alignment'", "must be u32, found u64"}));
  b = valid();
  b.add_string("general.alignment", "32");
  EXPECT_TRUE(message_has(open_error(b), {file(), "'general.alignment'", "must be u32"}));
  b = valid();
  b.add_u32("general.alignment", 1u << 31);
  EXPECT_TRUE(message_has(open_error(b), {file(), "'general.alignment'", "exceeds the limit"}));
  // A valid alignment is honoured: offsets and the data start follow it.
  b = valid();
  b.alignment = 256;
  b.add_u32("general.alignment", 256);
  b.write(path());
  auto f = GgufFile::open(file());
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->tensor("c").offset % 256, 0u);
  EXPECT_EQ(std::to_integer<uint8_t>(f->tensor("b").data[0]),
            GgufBuilder::pattern_byte(f->tensor("b").offset - f->data_offset()));
}

TEST_F(GgufCorrupt, TensorNames) {
  GgufBuilder b = valid();
  b.tensors[1].name = std::string(64, 'n');
  EXPECT_TRUE(message_has(
      open_error(b), {file(), "tensor #1 'nnnn", "name of 64 bytes", "exceeds the limit of 63"}));
  b = valid();
  b.tensors[1].name = std::string(63, 'n');  // the longest allowed
  b.write(path());
  EXPECT_NO_THROW(GgufFile::open(file()));
  b = valid();
  b.tensors[1].name_len = kMinus1;
  EXPECT_TRUE(message_has(open_error(b), {file(), "truncated", "tensor #1 name"}));
  b = valid();
  b.tensors[1].name = "";
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor #1: empty name"}));
  b = valid();
  b.tensors[2].name = "a";
  EXPECT_TRUE(message_has(open_error(b), {file(), "duplicate tensor 'a'"}));
}

TEST_F(GgufCorrupt, NDims) {
  for (uint32_t n : {0u, 5u, 0xffffffffu}) {
    GgufBuilder b = valid();
    b.tensors[0].n_dims = n;
    EXPECT_TRUE(message_has(
        open_error(b), {file(), "tensor 'a'", "n_dims " + std::to_string(n) + " is not in 1..4"}));
  }
}

TEST_F(GgufCorrupt, NonPositiveDimension) {
  for (int64_t d : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    GgufBuilder b = valid();
    b.tensors[0].ne = {8, d};
    EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'a'",
                                            "ne[1] = " + std::to_string(d) + " is not positive"}));
  }
}

TEST_F(GgufCorrupt, SizeOverflow) {
  GgufBuilder b = valid();
  b.data_bytes = 0;
  b.tensors[0].ne = {int64_t{1} << 32, int64_t{1} << 32};  // 2^64 elements
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'a'", "element count overflows"}));
  b.tensors[0].ne = {int64_t{1} << 62, 1};  // 2^62 f32 elements: 2^64 bytes
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'a'", "byte size overflows"}));
  b.tensors[0].ne = {int64_t{1} << 40, int64_t{1} << 10};  // fits, but far past the end
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'a'", "truncated file or bad offset"}));
}

TEST_F(GgufCorrupt, UnsupportedTensorType) {
  GgufBuilder b = valid();
  b.tensors[1].type = 16;  // iq2_xxs: a real ggml type rwkvd does not read
  EXPECT_TRUE(message_has(open_error(b), {file(), "unsupported type iq2_xxs in tensor 'b'"}));
  b.tensors[1].type = 999;
  EXPECT_TRUE(message_has(open_error(b), {file(), "unsupported type type#999 in tensor 'b'"}));
}

TEST_F(GgufCorrupt, RowNotWholeBlocks) {
  GgufBuilder b = valid();
  b.tensors[1].ne = {40};  // q8_0 blocks are 32 elements
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'b'", "ne[0] = 40",
                                          "not a multiple of the q8_0 block size 32"}));
}

TEST_F(GgufCorrupt, MisalignedOffset) {
  GgufBuilder b = valid();
  b.tensors[1].offset = 65;
  EXPECT_TRUE(message_has(open_error(b),
                          {file(), "tensor 'b'", "offset 65", "not a multiple of alignment 32"}));
}

TEST_F(GgufCorrupt, OffsetPastTheEnd) {
  GgufBuilder b = valid();
  const uint64_t data = b.data_size();
  b.tensors[2].offset = data + 32;  // starts past the end
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'c'", "truncated file or bad offset",
                                          "data section has " + std::to_string(data)}));
  b = valid();
  b.data_bytes = b.packed_offsets()[2] + 4;  // starts inside, ends past: 4 of its 8 bytes
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'c'", "truncated file or bad offset"}));
  b = valid();
  b.tensors[2].offset = kMinus1 / 32 * 32;  // offset + size wraps around 2^64
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'c'", "truncated file or bad offset"}));
}

TEST_F(GgufCorrupt, OverlappingTensors) {
  GgufBuilder b = valid();
  b.tensors[1].offset = 32;  // inside 'a' (bytes 0..63)
  EXPECT_TRUE(message_has(open_error(b), {file(), "tensor 'b' overlaps tensor 'a'"}));
  b = valid();
  b.tensors[2].offset = 0;  // same start as 'a'
  EXPECT_TRUE(message_has(open_error(b), {file(), "overlaps"}));
}

TEST_F(GgufCorrupt, TypedGettersNameTheKey) {
  valid().write(path());
  auto f = GgufFile::open(file());
  EXPECT_TRUE(message_has(test::engine_error_of([&] { f->get_u32("test.eps"); }),
                          {file(), "'test.eps'", "must be an integer, found f32"}));
  EXPECT_TRUE(message_has(test::engine_error_of([&] { f->get_string("nope"); }),
                          {file(), "'nope'", "missing"}));
  EXPECT_TRUE(message_has(test::engine_error_of([&] { f->tensor("nope"); }),
                          {file(), "missing tensor 'nope'"}));
}

}  // namespace
}  // namespace rwkvd::engine
