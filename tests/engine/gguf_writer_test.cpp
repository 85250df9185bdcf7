// GgufWriter: what it writes reads back identically through GgufFile, it refuses what the
// reader would refuse, and opening a file does not read its tensor data.
#include "engine/gguf_writer.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/gguf.h"
#include "tests/support/engine_error.h"
#include "tests/support/gguf_builder.h"

namespace rwkvd::engine {
namespace {

using test::message_has;

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>(i * 29 + seed));
  return v;
}

template <typename T>
T scalar_at(const GgufArray& a, size_t i) {
  T v;
  std::memcpy(&v, a.raw.data() + i * sizeof(T), sizeof(T));
  return v;
}

class GgufWriterTest : public ::testing::Test {
 protected:
  std::string file() const { return (dir_ / "out.gguf").string(); }
  test::TempDir dir_;
};

TEST_F(GgufWriterTest, RoundTripEveryValueTypeAndTensorBytes) {
  const std::array<int32_t, 4> i32s{-1, 0, 7, 1 << 30};
  const std::array<float, 2> f32s{1.5f, -0.25f};
  const std::array<uint64_t, 2> u64s{0, ~uint64_t{0}};
  const std::array<bool, 3> bools{true, false, true};
  const std::vector<std::string> strs{"<s>", "\\x00", "", "h\xc3\xa9llo"};
  const std::array<uint8_t, 2> inner_a{1, 2};
  const std::array<GgufMetaValue, 2> nested{GgufMetaValue::array<uint8_t>(inner_a),
                                            GgufMetaValue::strings(strs)};
  struct T {
    const char* name;
    std::vector<int64_t> ne;
    GgmlType type;
  };
  const std::vector<T> tensors{{"f32", {8, 3}, GgmlType::F32},
                               {"f16", {5}, GgmlType::F16},
                               {"q8", {64, 2}, GgmlType::Q8_0},
                               {"q4k", {256}, GgmlType::Q4_K},
                               {"bf16", {2, 1, 3, 2}, GgmlType::BF16}};
  std::vector<std::vector<std::byte>> data;
  {
    GgufWriter w(file());
    w.add("u8", GgufMetaValue::u8(200));
    w.add("i8", GgufMetaValue::i8(-100));
    w.add("u16", GgufMetaValue::u16(60000));
    w.add("i16", GgufMetaValue::i16(-30000));
    w.add_u32("u32", 4000000000u);
    w.add("i32", GgufMetaValue::i32(-2000000000));
    w.add_f32("f32", 0.1f);
    w.add("bool", GgufMetaValue::boolean(true));
    w.add_string("string", "rwkv7");
    w.add("u64", GgufMetaValue::u64(uint64_t{1} << 60));
    w.add("i64", GgufMetaValue::i64(-(int64_t{1} << 60)));
    w.add("f64", GgufMetaValue::f64(0.1));
    w.add("arr.i32", GgufMetaValue::array<int32_t>(i32s));
    w.add("arr.f32", GgufMetaValue::array<float>(f32s));
    w.add("arr.u64", GgufMetaValue::array<uint64_t>(u64s));
    w.add("arr.bool", GgufMetaValue::array_of_bool(bools));
    w.add("arr.str", GgufMetaValue::strings(strs));
    w.add("arr.nested", GgufMetaValue::arrays(nested));
    for (const T& t : tensors) w.add_tensor(t.name, t.ne, t.type);
    w.write_header();
    uint8_t seed = 1;
    for (const GgufWriterTensor& t : w.tensors()) {
      data.push_back(pattern(t.n_bytes, seed++));
      // Stream in uneven chunks, as a generator would.
      const std::span<const std::byte> all(data.back());
      w.begin_tensor(t.name);
      for (size_t off = 0; off < all.size(); off += 7) {
        w.write(all.subspan(off, std::min<size_t>(7, all.size() - off)));
      }
      w.end_tensor();
    }
    w.finish();
    EXPECT_EQ(w.bytes_written(), w.file_size());
    EXPECT_EQ(std::filesystem::file_size(file()), w.file_size());
  }
  EXPECT_FALSE(std::filesystem::exists(file() + ".partial"));

  auto f = GgufFile::open(file());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(f->metadata()[0].first, "u8");  // file order is kept
  EXPECT_EQ(f->get_u32("u8"), 200u);
  EXPECT_EQ(std::get<int64_t>(f->find("i8")->value), -100);
  EXPECT_EQ(f->get_u32("u16"), 60000u);
  EXPECT_EQ(std::get<int64_t>(f->find("i16")->value), -30000);
  EXPECT_EQ(f->get_u32("u32"), 4000000000u);
  EXPECT_EQ(std::get<int64_t>(f->find("i32")->value), -2000000000);
  EXPECT_EQ(f->get_f32("f32"), 0.1f);
  EXPECT_EQ(f->find("bool")->type, GgufValueType::BOOL);
  EXPECT_TRUE(std::get<bool>(f->find("bool")->value));
  EXPECT_EQ(f->get_string("string"), "rwkv7");
  EXPECT_EQ(f->get_u64("u64"), uint64_t{1} << 60);
  EXPECT_EQ(std::get<int64_t>(f->find("i64")->value), -(int64_t{1} << 60));
  EXPECT_EQ(std::get<double>(f->find("f64")->value), 0.1);
  const GgufArray& ai = f->get_array("arr.i32");
  ASSERT_EQ(ai.elem_type, GgufValueType::I32);
  ASSERT_EQ(ai.count, 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(scalar_at<int32_t>(ai, i), i32s[i]);
  EXPECT_EQ(scalar_at<float>(f->get_array("arr.f32"), 1), -0.25f);
  EXPECT_EQ(scalar_at<uint64_t>(f->get_array("arr.u64"), 1), ~uint64_t{0});
  const GgufArray& ab = f->get_array("arr.bool");
  EXPECT_EQ(ab.elem_type, GgufValueType::BOOL);
  EXPECT_EQ(scalar_at<uint8_t>(ab, 1), 0);
  const GgufArray& as = f->get_array("arr.str");
  ASSERT_EQ(as.strings.size(), strs.size());
  for (size_t i = 0; i < strs.size(); ++i) EXPECT_EQ(as.strings[i], strs[i]);
  const GgufArray& an = f->get_array("arr.nested");
  ASSERT_EQ(an.arrays.size(), 2u);
  EXPECT_EQ(std::get<GgufArray>(an.arrays[0].value).count, 2u);
  EXPECT_EQ(std::get<GgufArray>(an.arrays[1].value).strings[3], strs[3]);

  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensor& t = f->tensors()[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.type, tensors[i].type);
    EXPECT_EQ(t.n_dims, tensors[i].ne.size());
    for (size_t d = 0; d < tensors[i].ne.size(); ++d) EXPECT_EQ(t.ne[d], tensors[i].ne[d]);
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.data.size(), data[i].size());
    EXPECT_EQ(std::memcmp(t.data.data(), data[i].data(), data[i].size()), 0) << t.name;
  }
}

TEST_F(GgufWriterTest, HonoursGeneralAlignment) {
  GgufWriter w(file());
  w.add_u32("general.alignment", 128);
  w.add_tensor("a", {3}, GgmlType::F32);
  w.add_tensor("b", {3}, GgmlType::F32);
  w.write_header();
  const auto bytes = pattern(12, 3);
  w.write_tensor("a", bytes);
  w.write_tensor("b", bytes);
  w.finish();
  auto f = GgufFile::open(file());
  EXPECT_EQ(f->alignment(), 128u);
  EXPECT_EQ(f->data_offset() % 128, 0u);
  EXPECT_EQ(f->tensor("b").offset - f->tensor("a").offset, 128u);
}

// Zeros written as holes read back as zeros, beside written bytes and at the file's end (where
// no later write gives the file its size), and count against the tensor's size like bytes.
TEST_F(GgufWriterTest, ZerosLeftAsHolesReadBackAsZeros) {
  GgufWriter w(file());
  w.add_tensor("a", {4096}, GgmlType::F32);
  w.add_tensor("b", {4096}, GgmlType::F32);
  w.write_header();
  const auto bytes = pattern(8, 5);
  w.begin_tensor("a");
  w.write(bytes);
  w.write_zeros(4 * 4096 - 8);
  w.end_tensor();
  w.begin_tensor("b");
  EXPECT_THROW(w.write_zeros(4 * 4096 + 1), EngineError);
  w.write_zeros(4 * 4096);
  w.end_tensor();
  w.finish();
  auto f = GgufFile::open(file());
  EXPECT_EQ(std::filesystem::file_size(file()), f->tensor("b").offset + 4 * 4096);
  const auto a = f->tensor("a").data, b = f->tensor("b").data;
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), a.begin()));
  EXPECT_TRUE(std::all_of(a.begin() + 8, a.end(), [](std::byte x) { return x == std::byte{0}; }));
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; }));
}

TEST_F(GgufWriterTest, RefusesWhatTheReaderRefuses) {
  GgufWriter w(file());
  auto err = [&](auto fn) { return test::engine_error_of(fn); };
  EXPECT_TRUE(message_has(err([&] { w.add_u32("", 1); }), {file(), "empty metadata key"}));
  w.add_u32("k", 1);
  EXPECT_TRUE(message_has(err([&] { w.add_u32("k", 2); }), {file(), "duplicate", "'k'"}));
  EXPECT_TRUE(message_has(err([&] { w.add_u32("general.alignment", 48); }),
                          {file(), "'general.alignment' = 48", "power of two"}));
  EXPECT_TRUE(message_has(err([&] { w.add("general.alignment", GgufMetaValue::u64(64)); }),
                          {file(), "'general.alignment'", "must be u32"}));
  EXPECT_TRUE(message_has(err([&] { w.add_tensor(std::string(64, 'x'), {1}, GgmlType::F32); }),
                          {file(), "name of 64 bytes"}));
  EXPECT_TRUE(
      message_has(err([&] { w.add_tensor("t", std::span<const int64_t>{}, GgmlType::F32); }),
                  {file(), "tensor 't'", "0 dimensions"}));
  EXPECT_TRUE(message_has(err([&] {
                            w.add_tensor("t", {1, 1, 1, 1, 1}, GgmlType::F32);
                          }),
                          {file(), "tensor 't'", "5 dimensions"}));
  EXPECT_TRUE(message_has(err([&] {
                            w.add_tensor("t", {4, 0}, GgmlType::F32);
                          }),
                          {file(), "tensor 't'", "ne[1] = 0"}));
  EXPECT_TRUE(message_has(err([&] { w.add_tensor("t", {100}, GgmlType::Q4_K); }),
                          {file(), "tensor 't'", "q4_K block size 256"}));
  EXPECT_TRUE(message_has(err([&] {
                            w.add_tensor("t", {int64_t{1} << 62, 4}, GgmlType::F32);
                          }),
                          {file(), "tensor 't'", "overflows"}));
  w.add_tensor("t", {4}, GgmlType::F32);
  w.add_tensor("u", {4}, GgmlType::F32);
  EXPECT_TRUE(message_has(err([&] { w.add_tensor("t", {4}, GgmlType::F32); }),
                          {file(), "duplicate tensor 't'"}));
  EXPECT_TRUE(message_has(err([&] { w.begin_tensor("t"); }), {file(), "out of order"}));
  w.write_header();
  EXPECT_TRUE(message_has(err([&] { w.add_u32("late", 1); }), {file(), "after the header"}));
  EXPECT_TRUE(message_has(err([&] { w.begin_tensor("u"); }),
                          {file(), "'u' written where 't' was declared"}));
  w.begin_tensor("t");
  const auto bytes = pattern(20, 0);
  EXPECT_TRUE(message_has(err([&] { w.write(bytes); }),
                          {file(), "tensor 't'", "20 bytes written, its size is 16"}));
  w.write(std::span(bytes).first(8));
  EXPECT_TRUE(message_has(err([&] { w.end_tensor(); }),
                          {file(), "tensor 't'", "8 bytes written, its size is 16"}));
  w.write(std::span(bytes).first(8));
  w.end_tensor();
  EXPECT_TRUE(message_has(err([&] { w.finish(); }), {file(), "before tensor 'u'"}));
  EXPECT_FALSE(std::filesystem::exists(file()));
}

TEST_F(GgufWriterTest, UnfinishedFileIsRemoved) {
  {
    GgufWriter w(file());
    w.add_tensor("t", {4}, GgmlType::F32);
    w.write_header();
    EXPECT_TRUE(std::filesystem::exists(file() + ".partial"));
  }
  EXPECT_FALSE(std::filesystem::exists(file() + ".partial"));
  EXPECT_FALSE(std::filesystem::exists(file()));
}

TEST_F(GgufWriterTest, ReportsAnUnwritableDirectory) {
  GgufWriter w((dir_ / "no-such-dir" / "x.gguf").string());
  EXPECT_TRUE(message_has(test::engine_error_of([&] { w.write_header(); }),
                          {"no-such-dir/x.gguf", "cannot create"}));
}

// Opening reads the header only: on a file whose 256 MB data section is a hole, the pages of
// that section stay out of the page cache (a reader that touched them would fault them in).
TEST_F(GgufWriterTest, OpenDoesNotTouchTensorData) {
  test::GgufBuilder b;
  b.add_string("general.architecture", "test");
  b.add_tensor("big", {int64_t{1} << 16, int64_t{1} << 10}, 0);  // 256 MiB of f32
  b.add_tensor("small", {32}, 8);
  b.data_bytes = (uint64_t{256} << 20) + 64;
  const auto path = dir_ / "sparse.gguf";
  b.write(path, /*sparse=*/true);
  auto f = GgufFile::open(path.string());
  const GgufTensor& big = f->tensor("big");
  EXPECT_EQ(big.n_bytes, uint64_t{256} << 20);
  EXPECT_EQ(big.data.size(), big.n_bytes);

  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto* base = f->mapping().bytes().data();
  const size_t first = (big.offset + page - 1) / page;
  const size_t last = (big.offset + big.n_bytes) / page;
  auto resident_pages = [&] {
    std::vector<unsigned char> resident(last - first);
    EXPECT_EQ(::mincore(const_cast<std::byte*>(base) + first * page, (last - first) * page,
                        resident.data()),
              0);
    size_t n = 0;
    for (unsigned char r : resident) n += r & 1;
    return n;
  };
  // Readahead around the header may bring in a few pages; the reader must not bring in more.
  const size_t n_pages = last - first;
  EXPECT_LT(resident_pages(), n_pages / 100) << "of " << n_pages;
  // The probe itself works: reading 2000 pages of the hole makes them resident.
  unsigned sum = 0;
  for (size_t p = 0; p < 2000; ++p) sum += std::to_integer<unsigned>(base[(first + p) * page]);
  EXPECT_EQ(sum, 0u);
  EXPECT_GE(resident_pages(), 2000u);
}

}  // namespace
}  // namespace rwkvd::engine
