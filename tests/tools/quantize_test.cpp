// `rwkvd quantize` against llama.cpp's quantizer on the same F32 source (synthetic-A): the same
// per-tensor types, untouched tensors copied bit for bit, and outputs that agree with llama.cpp's
// file at least as well as the README's variant-vs-F32 differences.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/model.h"
#include "tests/support/compare.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_builder.h"
#include "tools/quantize/requantize.h"

namespace rwkvd::tools::quantize {
namespace {

std::vector<float> all_logits(const std::string& path, const std::vector<int32_t>& toks) {
  engine::BackendOptions o;
  o.n_slots = 1;
  auto b = engine::make_cpu_backend(engine::Rwkv7Model::load(path), o);
  const engine::SequenceInput in{0, toks, engine::OutputMode::kAllLogits};
  return b->run({&in, 1})[0].data;
}

TEST(Quantize, Q4KMMatchesLlamaCppTypesAndOutputs) {
  RWKVD_FIXTURE(src, "rwkv7/synthetic-A.f32.gguf");
  RWKVD_FIXTURE(ref, "rwkv7/synthetic-A.q4_k_m.gguf");
  test::TempDir dir;
  const std::string out = (dir.path() / "q4km.gguf").string();
  const auto r = requantize(src.string(), out, engine::QuantFtype::Q4_K_M);
  EXPECT_GT(r.in_bytes, r.out_bytes);

  auto ours = engine::GgufFile::open(out);
  auto theirs = engine::GgufFile::open(ref.string());
  auto source = engine::GgufFile::open(src.string());
  EXPECT_EQ(ours->get_u32("general.file_type"), 15u);
  ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
  for (const auto& t : ours->tensors()) {
    const auto& l = theirs->tensor(t.name);
    EXPECT_EQ(t.type, l.type) << t.name;
    EXPECT_EQ(t.ne, l.ne) << t.name;
    if (t.type == engine::GgmlType::F32) {  // kept: identical bytes
      const auto& s = source->tensor(t.name);
      EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), s.data.begin(), s.data.end())) << t.name;
    }
  }
  // Our file against llama.cpp's, both run by our CPU forward: two quantizations of the same
  // weights differ by less than either does from F32 (README: Q4_K_M vs F32, max 3.02, lowest
  // per-position correlation 0.9647).
  const auto toks = test::manifest_tokens("synthetic-A.q4_k_m.seq64.llama.logits.f32.bin");
  const auto d = test::compare_rows(all_logits(out, toks), all_logits(ref.string(), toks), 1024);
  std::printf("our Q4_K_M vs llama.cpp's Q4_K_M file: %s\n", d.str().c_str());
  EXPECT_LT(d.max_abs, 3.02);
  EXPECT_GT(d.min_row_pearson, 0.9647);
}

TEST(Quantize, RequantizesQuantizedInputAndRejectsBadInput) {
  RWKVD_FIXTURE(src, "rwkv7/synthetic-A.q4_k_m.gguf");
  test::TempDir dir;
  const std::string out = (dir.path() / "q8.gguf").string();
  requantize(src.string(), out, engine::QuantFtype::Q8_0);
  auto m = engine::Rwkv7Model::load(out);
  EXPECT_EQ(m->layers()[0].key->type, engine::GgmlType::Q8_0);

  const std::string missing = (dir.path() / "missing.gguf").string();
  const std::string never = (dir.path() / "never.gguf").string();
  EXPECT_THROW(requantize(missing, never, engine::QuantFtype::Q8_0), engine::EngineError);
  EXPECT_FALSE(std::filesystem::exists(never));
}

}  // namespace
}  // namespace rwkvd::tools::quantize
