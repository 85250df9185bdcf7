// Damaged or foreign converter inputs give an EngineError that says what is wrong and where.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "engine/convert/rwkv7_names.h"
#include "engine/convert/rwkvcpp_bin.h"
#include "engine/convert/safetensors.h"
#include "engine/error.h"
#include "tests/engine/convert_files.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine::convert {
namespace {

using testing::temp_path;

// The EngineError message of `fn`, or a note that it did not throw.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const EngineError& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

constexpr const char* kTinyBin = "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP32.bin";

// Writes the tiny model's tensors, edited by `edit`, as an rwkv.cpp file and plans it.
std::string plan_error_after(const SourceModel& tiny, const std::string& file,
                             const std::function<void(std::vector<SourceTensor>&)>& edit) {
  auto tensors = tiny.tensors;
  edit(tensors);
  const auto path = temp_path(file);
  testing::write_file(path, testing::rwkvcpp_bin_bytes(tensors, 256, 64, 12));
  return error_of([&] { plan_rwkv7(read_rwkvcpp_bin(path.string())); });
}

SourceTensor& named(std::vector<SourceTensor>& ts, const std::string& name) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const auto& t) { return t.name == name; });
  if (it == ts.end()) throw std::runtime_error("no tensor " + name);
  return *it;
}

TEST(ConvertErrors, TruncatedBinNamesTheTensor) {
  RWKVD_FIXTURE(bin, kTinyBin);
  auto bytes = testing::read_file(bin);
  bytes.resize(bytes.size() - 1000);  // inside head.weight, the last tensor
  const auto path = temp_path("truncated.bin");
  testing::write_file(path, bytes);
  const auto msg = error_of([&] { read_rwkvcpp_bin(path.string()); });
  EXPECT_CONTAINS(msg, "truncated");
  EXPECT_CONTAINS(msg, "head.weight");
  EXPECT_CONTAINS(msg, path.string());
}

TEST(ConvertErrors, BinWithBadMagicOrVersion) {
  RWKVD_FIXTURE(bin, kTinyBin);
  auto bytes = testing::read_file(bin);
  bytes[0] = std::byte{'G'};
  testing::write_file(temp_path("magic.bin"), bytes);
  EXPECT_CONTAINS(error_of([&] { read_rwkvcpp_bin(temp_path("magic.bin").string()); }),
                  "not an rwkv.cpp model file");
  bytes = testing::read_file(bin);
  bytes[4] = std::byte{99};
  testing::write_file(temp_path("version.bin"), bytes);
  EXPECT_CONTAINS(error_of([&] { read_rwkvcpp_bin(temp_path("version.bin").string()); }),
                  "unsupported rwkv.cpp file version 99");
}

TEST(ConvertErrors, QuantisedBinIsRefused) {
  RWKVD_FIXTURE(bin, kTinyBin);
  auto bytes = testing::read_file(bin);
  bytes[24 + 8] = std::byte{9};  // emb.weight's data type: Q8_0
  testing::write_file(temp_path("q8.bin"), bytes);
  const auto msg = error_of([&] { read_rwkvcpp_bin(temp_path("q8.bin").string()); });
  EXPECT_CONTAINS(msg, "emb.weight is quantised");
  EXPECT_CONTAINS(msg, "FP16 or FP32");
}

TEST(ConvertErrors, BinHeaderMustAgreeWithTensors) {
  RWKVD_FIXTURE(bin, kTinyBin);
  const auto tiny = read_rwkvcpp_bin(bin.string());
  const auto path = temp_path("header.bin");
  testing::write_file(path, testing::rwkvcpp_bin_bytes(tiny.tensors, 256, 64, 11));
  EXPECT_CONTAINS(error_of([&] { read_rwkvcpp_bin(path.string()); }),
                  "header says n_layer 11 but the file has 12 blocks");
}

TEST(ConvertErrors, UnknownMissingAndMisshapenTensors) {
  RWKVD_FIXTURE(bin, kTinyBin);
  const auto tiny = read_rwkvcpp_bin(bin.string());
  EXPECT_CONTAINS(
      plan_error_after(tiny, "unknown.bin",
                       [](auto& ts) { named(ts, "blocks.2.att.k_k").name = "blocks.2.att.k_q"; }),
      "unknown tensor name blocks.2.att.k_q");
  EXPECT_CONTAINS(plan_error_after(tiny, "v6.bin",
                                   [](auto& ts) {
                                     named(ts, "blocks.0.att.w0").name = "blocks.0.att.time_decay";
                                   }),
                  "RWKV-4/5/6");
  EXPECT_CONTAINS(
      plan_error_after(
          tiny, "missing.bin",
          [](auto& ts) { ts.erase(ts.begin() + (&named(ts, "blocks.3.att.g2") - ts.data())); }),
      "missing tensor blocks.3.att.g2");
  EXPECT_CONTAINS(plan_error_after(tiny, "shape.bin",
                                   [](auto& ts) {
                                     named(ts, "blocks.4.ffn.key.weight").shape = {128, 128};
                                   }),
                  "blocks.4.ffn.key.weight has shape [128, 128], expected [256, 64]");
  EXPECT_CONTAINS(plan_error_after(tiny, "lora.bin",
                                   [](auto& ts) {
                                     named(ts, "blocks.7.att.a2").shape = {32, 64};
                                   }),
                  "blocks.7.att.a2 has shape [32, 64], expected [64, 32] (transposed LoRA layout)");
}

std::string st_error(const std::string& file, std::vector<std::byte> bytes) {
  testing::write_file(temp_path(file), bytes);
  return error_of([&] { plan_rwkv7(read_safetensors(temp_path(file).string())); });
}

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A SafeTensors file with a hand-written JSON header and `data_bytes` zero bytes of data.
std::vector<std::byte> st_with_header(const std::string& json, size_t data_bytes) {
  std::vector<std::byte> out(8);
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  const auto j = bytes_of(json);
  out.insert(out.end(), j.begin(), j.end());
  out.resize(out.size() + data_bytes);
  return out;
}

TEST(ConvertErrors, DamagedSafetensors) {
  RWKVD_FIXTURE(bin, kTinyBin);
  const auto tiny = read_rwkvcpp_bin(bin.string());
  auto bytes = testing::safetensors_bytes(tiny.tensors);
  EXPECT_EQ(st_error("ok.st", bytes), "(no error)");  // rwkv.cpp's layout, as web-rwkv's
  bytes.resize(bytes.size() - 10);
  EXPECT_CONTAINS(st_error("truncated.st", bytes), "(truncated file?)");
  EXPECT_CONTAINS(st_error("short.st", {bytes.begin(), bytes.begin() + 100}),
                  "does not fit the 100-byte file");
  EXPECT_CONTAINS(st_error("json.st", st_with_header("{\"a\": {\"dtype\": ", 0)),
                  "header is not a JSON object");
  EXPECT_CONTAINS(
      st_error("i8.st", st_with_header(R"({"emb.weight": {"dtype": "I8", "shape": [2], )"
                                       R"("data_offsets": [0, 2]}})",
                                       2)),
      "tensor emb.weight: dtype I8 is not supported");
  EXPECT_CONTAINS(
      st_error("size.st", st_with_header(R"({"emb.weight": {"dtype": "F32", "shape": [2, 3], )"
                                         R"("data_offsets": [0, 20]}})",
                                         20)),
      "20 bytes of data but shape [2, 3] needs 24");
  EXPECT_CONTAINS(
      st_error("overlap.st",
               st_with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                              R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                              12)),
      "tensors a and b overlap");
}

// With every LoRA square (rank = D) the shapes cannot tell the layouts apart.
TEST(ConvertErrors, SquareLorasNeedALayout) {
  const auto m = testing::synthetic_blinkdl(32, 1, 16, 64, 32, 32);
  testing::write_file(temp_path("square.st"), testing::safetensors_bytes(m.tensors));
  const auto src = read_safetensors(temp_path("square.st").string());
  EXPECT_CONTAINS(error_of([&] { plan_rwkv7(src); }), "pass --lora-layout");
  const auto plan = plan_rwkv7(src, LoraLayout::kPytorch);
  EXPECT_EQ(plan.dims.rank_v, 32);  // llama.cpp's default: nothing to read it from in 1 layer
  EXPECT_EQ(plan.tensors.size(), 3 + 28 + 3u);  // 28 per layer, as in the fixture
}

TEST(ConvertErrors, LorasDisagreeingOnLayout) {
  auto m = testing::synthetic_blinkdl(64, 2, 16, 64, 64, 32);
  named(m.tensors, "blocks.1.att.g2").shape = {64, 32};  // transposed, unlike the others
  testing::write_file(temp_path("mixed.st"), testing::safetensors_bytes(m.tensors));
  EXPECT_CONTAINS(error_of([&] { plan_rwkv7(read_safetensors(temp_path("mixed.st").string())); }),
                  "LoRA matrices disagree on their layout");
}

}  // namespace
}  // namespace rwkvd::engine::convert
