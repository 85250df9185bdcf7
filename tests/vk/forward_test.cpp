// The Vulkan forward against the fixtures (fixtures/rwkv7/README.md) and against itself under
// chunking, batching and state transfers. Validation is on; any validation error fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "engine/backend.h"
#include "tests/support/compare.h"
#include "tests/support/fixture_bounds.h"
#include "tests/support/fixtures.h"
#include "tests/vk/backend_harness.h"
#include "tools/synth/config.h"
#include "tools/synth/synth.h"

namespace rwkvd::engine {
namespace {

using test::compare_rows;
using test::gpu;
using test::long_prompt;
using test::run_one;
using vk::Tuning;

class VkForward : public test::VkBackendTest {};

// Exact-weight paths: only the order of float additions differs from llama.cpp. The README
// measures llama.cpp 9.5e-7 (tiny) and 6.8e-6 (synthetic-A) from itself under batching and
// calls ~1e-5 realistic; we measured 3e-7 and 1.3e-5 (GPU reductions sum in a different order
// from the CPU's, over 1024 vocabulary rows of D=256).
constexpr double kTinyTol = 5e-6;
constexpr double kSyntheticTol = 4e-5;

TEST_F(VkForward, TinyText200MatchesLlamaAllPositions) {
  RWKVD_FIXTURE(prompt, "rwkv7/tiny-rwkv7-834K.text200.txt");
  const auto toks = test::text200_tokens();
  const auto dir = test::fixtures_root() / "rwkv7";
  // Chunks of 256 tokens: two sequences of 200 that want every token's output have more rows
  // than the readback holds (ForwardGeometry::kOutRows), so their chunks are cut to the rows.
  for (const auto& [variant, chunk] : {std::pair{"f32", 64u}, {"f16", 64u}, {"f32", 256u}}) {
    SCOPED_TRACE(std::string(variant) + ", chunks of " + std::to_string(chunk));
    auto b = gpu(dir / ("tiny-rwkv7-834K." + std::string(variant) + ".gguf"), chunk, 2);
    const std::string stem = "tiny-rwkv7-834K." + std::string(variant);
    const auto in =
        compare_rows(run_one(*b, std::vector<int32_t>{34, 105, 110}, OutputMode::kAllLogits),
                     test::read_f32_file(dir / (stem + ".in.llama.logits.f32.bin")), 256);
    // Logits and embeddings of the same tokens in one batch (two slots).
    b->reset_state(0);
    b->reset_state(1);
    const SequenceInput both[2] = {{0, toks, OutputMode::kAllLogits},
                                   {1, toks, OutputMode::kAllEmbeddings}};
    const auto out = b->run(both);
    const auto lg = compare_rows(
        out[0].data, test::read_f32_file(dir / (stem + ".text200.llama.logits.f32.bin")), 256);
    const auto em = compare_rows(
        out[1].data, test::read_f32_file(dir / (stem + ".text200.llama.embd.f32.bin")), 64);
    std::printf("tiny %s, chunks of %u \"in\": %s\n  text200 logits: %s\n  embd: %s\n", variant,
                chunk, in.str().c_str(), lg.str().c_str(), em.str().c_str());
    EXPECT_LT(in.max_abs, kTinyTol);
    EXPECT_LT(lg.max_abs, kTinyTol);
    EXPECT_LT(em.max_abs, kTinyTol);
  }
}

// Chunks of 64 tokens run the prefill products (tiles, tensor cores where present); chunks of 8
// the decode products, which for Q4_K/Q5_K weights read int8
// inputs where the device has integer dot products (mvq.comp): both against the fixtures.
TEST_F(VkForward, SyntheticAMatchesLlamaEveryVariantEveryPosition) {
  for (const test::VariantBounds& v : test::synthetic_a_bounds(kSyntheticTol, 4e-6)) {
    const std::string stem = std::string("synthetic-A.") + v.name;
    RWKVD_FIXTURE(model, "rwkv7/" + stem + ".gguf");
    const auto dir = test::fixtures_root() / "rwkv7";
    const auto toks = test::manifest_tokens(stem + ".seq64.llama.logits.f32.bin");
    for (const uint32_t chunk : {64u, 8u}) {
      auto b = gpu(model, chunk, 2);
      // Logits and embeddings of the same tokens in one batch (two slots).
      const SequenceInput in[2] = {{0, toks, OutputMode::kAllLogits},
                                   {1, toks, OutputMode::kAllEmbeddings}};
      const auto out = b->run(in);
      const auto lg = compare_rows(
          out[0].data, test::read_f32_file(dir / (stem + ".seq64.llama.logits.f32.bin")), 1024);
      const auto em = compare_rows(
          out[1].data, test::read_f32_file(dir / (stem + ".seq64.llama.embd.f32.bin")), 256);
      std::printf("%s, chunks of %u: logits: %s\n  embd: %s\n", stem.c_str(), chunk,
                  lg.str().c_str(), em.str().c_str());
      test::expect_within(v, lg, em);
    }
  }
}

// Chunking and batching may change only the order of float additions. Chunks of up to 32 tokens
// run the LoRA up products inside wkv (4 lanes per channel, another order of the same sums)
// and longer ones as a separate product: over 1000 tokens of the tiny model, chunk 1 vs 256
// differ by 1.7e-6 in logits and 2.6e-6 in state (lavapipe). The bound allows about 1 ulp per
// reordered sum (the README measures llama.cpp's
// one-call vs one-token at 9.5e-7 on the tiny model), grown along 1000 recurrent steps, on
// logits and state of magnitude <= 5. A boundary bug (state or token shift not carried into
// the next chunk) moves them by orders of magnitude more.
constexpr double kReorderTol = 1e-5;

// The check: a 1000-token prompt in chunks of 1, 7, 64 and 256 agrees with itself, in
// every position's logits and in the state left behind. The tiny model keeps lavapipe fast
// (~55 s in all, most of it chunk 1: a whole forward per token).
TEST_F(VkForward, AnyChunkSizeGivesTheSameResult) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const auto text = test::text200_tokens();
  std::vector<int32_t> toks;
  while (toks.size() < 1000) toks.push_back(text[toks.size() % text.size()]);
  test::expect_same_for_any_chunk([&](uint32_t chunk) { return gpu(model, chunk); }, toks,
                                  {256u, 1u, 7u, 64u}, kReorderTol);
}

// On devices with tensor cores, forwards of 5 to 16 tokens multiply on them (mcd.comp, fp16
// operands) and fewer on int8 inputs (mvq.comp): a sequence alone and in a batch would meet
// different roundings (H100, synthetic-A Q4_K_M: logits 0.14 apart, correlation 0.9999). The
// batch tests compare one product path, pinned by the backend's tuning (on devices without
// tensor cores every forward of up to 16 tokens runs the int8 products anyway).

// One token's shifts run in front of the products that read them (shaders/shift_front.glsl:
// each workgroup makes its input itself, its first lanes adding as shift.comp's lanes do): the
// int8 forms of the r/k/v and ffn key inputs and the float inputs of float products are the
// separate shifts' to the bit, so every logit and the state equal theirs
// (Tuning::shift_in_front off), with fewer dispatches a layer: Q4_K_M both shifts (the ffn key
// product on int8 inputs), F16 the time-mix one (every product of its step on floats; its ffn
// key product reads floats, which no shift in front writes). Tokens one at a time.
TEST_F(VkForward, ShiftsInFrontOfTheirProductsGiveTheSameBits) {
  for (const auto& [name, fewer] :
       {std::pair{"rwkv7/synthetic-A.q4_k_m.gguf", 2u}, {"rwkv7/tiny-rwkv7-834K.f16.gguf", 1u}}) {
    SCOPED_TRACE(name);
    RWKVD_FIXTURE(model, name);
    auto apart = gpu(model, 1, 1, [](Tuning& t) { t.shift_in_front = false; });
    auto fused = gpu(model, 1, 1);
    if (fused->dispatches_per_layer() == apart->dispatches_per_layer()) {
      GTEST_SKIP() << "this device's one-token products run no shift in front";
    }
    EXPECT_EQ(fused->dispatches_per_layer() + fewer, apart->dispatches_per_layer());
    const auto toks = long_prompt(48, fused->hparams().n_vocab);
    const auto a = run_one(*apart, toks, OutputMode::kAllLogits);
    const auto f = run_one(*fused, toks, OutputMode::kAllLogits);
    const auto dl = compare_rows(f, a, fused->hparams().n_vocab);
    const auto ds = compare_rows(test::read_state(*fused, 0), test::read_state(*apart, 0), 256);
    std::printf("%s, in front / apart: logits %s\n  state %s\n", name, dl.str().c_str(),
                ds.str().c_str());
    EXPECT_EQ(dl.max_abs, 0.0);
    EXPECT_EQ(ds.max_abs, 0.0);
  }
}

TEST_F(VkForward, BatchEqualsSequencesAlone) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_k_m.gguf");
  // One token on tensor cores too, the Q6_K head as well (by default up to 8 of its rows take the
  // int8 kernel, whose int8 inputs give other sums); 40 tokens run as 3 chunks.
  auto b = gpu(model, 16, 4, [](Tuning& t) {
    t.mcd_min_t = 1;
    t.q6_head_int8_max = 0;
  });
  test::expect_batch_equals_alone(*b, {1, 17, 40, 5}, kReorderTol);
}

// Loading makes every pipeline a forward can need: forwards of every kind of shape (one token,
// a few sequences, 17 and more logit rows, a long chunk with every row's logits, embeddings)
// compile nothing more. (On the H100 the head's tensor-core variant from float inputs was once
// made in the middle of a 32-sequence step: 150 ms.)
TEST_F(VkForward, ForwardsMakeNoPipelinesAfterLoading) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_k_m.gguf");
  auto b = gpu(model, 64, 24);
  b->wait_resident();
  const size_t made = b->pipelines_made();
  const uint32_t V = b->hparams().n_vocab;
  const std::vector<int32_t> one{5}, few = long_prompt(5, V), chunk = long_prompt(40, V);
  auto run = [&](size_t n_seq, const std::vector<int32_t>& toks, OutputMode mode) {
    std::vector<SequenceInput> batch;
    for (uint32_t i = 0; i < n_seq; ++i) batch.push_back({i, toks, mode});
    b->run(batch);
  };
  for (const OutputMode m : {OutputMode::kLastLogits, OutputMode::kLastArgmax,
                             OutputMode::kLastEmbedding, OutputMode::kNone}) {
    for (const size_t n_seq : {1, 4, 8, 20, 24}) run(n_seq, one, m);
    run(6, few, m);
  }
  run(1, chunk, OutputMode::kAllLogits);
  run(2, chunk, OutputMode::kAllEmbeddings);
  run(1, chunk, OutputMode::kNone);
  EXPECT_EQ(b->pipelines_made(), made);
}

// RWKVD_VK_PROFILE: a table of GPU time per kernel (timestamps), or with host: only the host's
// phases of each forward; either written when the backend closes.
TEST_F(VkForward, ProfilerWritesKernelOrHostTables) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f16.gguf");
  const auto dir = std::filesystem::temp_directory_path();
  for (const bool host_only : {false, true}) {
    const auto path = dir / ("rwkvd-profile-" + std::to_string(::getpid()) + ".md");
    std::filesystem::remove(path);
    const std::string value = (host_only ? "host:" : "") + path.string();
    {
      setenv("RWKVD_VK_PROFILE", value.c_str(), 1);  // (a switch of the environment alone)
      auto b = gpu(model, 16, 1);
      unsetenv("RWKVD_VK_PROFILE");
      const std::vector<int32_t> toks{1, 2, 3};
      run_one(*b, toks, OutputMode::kLastLogits);
    }
    std::FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << value;
    std::string text(1 << 16, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), f));
    std::fclose(f);
    std::filesystem::remove(path);
    EXPECT_NE(text.find("prepare + submit"), std::string::npos) << text;
    EXPECT_NE(text.find(host_only ? "Host time per forward" : "GPU time per kernel"),
              std::string::npos)
        << text;
    // Kernel rows only with timestamps.
    EXPECT_EQ(text.find("| wkv |") != std::string::npos, !host_only) << text;
  }
}

// The argmax on the device (every head row an argmax) and on the host (mixed with a logits
// row), against the logits' own argmax; the three sequences (10 tokens) make one chunk.
TEST_F(VkForward, ArgmaxOutputIsTheLogitsArgmax) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_k_m.gguf");
  auto b = gpu(model, 16, 3);
  test::expect_argmax_of_last_logits(*b);
}

// More sequences than wkv does the LoRA up products for (kFusedLoraMaxB): the batch runs them as
// products of their own, each sequence alone inside wkv; the same numbers either way. One token
// each: ten sequences run wkv without its LoRA up phase (more than kFusedLoraMaxB), one alone
// with it, the same fp32 products summed in another order. Measured on the H100: 1.8e-5
// (sequence 2 of synthetic-A Q4_K_M; lavapipe: under 1e-5); the bound leaves ~3x that. The
// products run on float inputs (mv.comp): rounding the next products' inputs to int8 or fp16
// turns those last-bit differences into flips of a rounding (int8: 0.073 on sequence 2 once
// mvq.comp's split of K moved the last bits; fp16 on tensor cores: 7.8e-3), which would hide a
// wrong LoRA path less well.
constexpr double kLoraPathTol = 5e-5;

TEST_F(VkForward, ManySequencesEqualSequencesAlone) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_k_m.gguf");
  constexpr uint32_t kSeqs = 10;
  auto b = gpu(model, 32, kSeqs, [](Tuning& t) {
    t.mcd_max_t = 0;
    t.int_dot = false;
  });
  std::vector<std::vector<int32_t>> seqs;
  std::vector<engine::SequenceInput> batch;
  for (uint32_t i = 0; i < kSeqs; ++i) {
    seqs.push_back(long_prompt(1 + 10 * i, b->hparams().n_vocab));
    seqs.back().erase(seqs.back().begin(), seqs.back().end() - 1);
  }
  for (uint32_t i = 0; i < kSeqs; ++i) {
    b->reset_state(i);
    batch.push_back({i, seqs[i], engine::OutputMode::kLastLogits});
  }
  const auto together = b->run(batch);
  for (uint32_t i = 0; i < kSeqs; ++i) {
    const auto alone = run_one(*b, seqs[i], engine::OutputMode::kLastLogits, i);
    const auto d = compare_rows(together[i].data, alone, b->hparams().n_vocab);
    EXPECT_LT(d.max_abs, kLoraPathTol) << "sequence " << i << ": " << d.str();
  }
}

// F16 files hold the LoRA up weights a2, g2 and v2 in F16 and w2 in F32, as the converters write
// them (the fixtures' F16 files keep every LoRA weight in F32, so a synthesized one stands in):
// where wkv does the LoRA up products itself (a decode step of 2 to kFusedLoraMaxB sequences) it
// reads both kinds, and must give what the products give (Tuning::fuse_lora off). fp16 weights
// widen exactly, so only the order of float sums differs: the LoRA path's bound.
TEST_F(VkForward, F16LoraUpInsideWkvEqualsProducts) {
  tools::synth::SynthConfig cfg;
  cfg.layers = 2;
  cfg.embd = 128;
  cfg.vocab = 300;
  cfg.type = tools::synth::FileType::kF16;
  cfg.seed = 5;
  const std::filesystem::path model =
      std::filesystem::path(::testing::TempDir()) / "rwkvd-f16-lora-up.gguf";
  tools::synth::synthesize(cfg, model.string());
  constexpr uint32_t kSeqs = 3;
  std::vector<std::vector<float>> logits[2];
  for (const bool inside : {false, true}) {
    auto b = gpu(model, 32, kSeqs, [&](Tuning& t) { t.fuse_lora = inside; });
    const std::vector<std::string> f = b->device_features();
    const bool fuses = std::find(f.begin(), f.end(), "lora_in_wkv") != f.end();
    if (inside && !fuses) GTEST_SKIP() << "this device's wkv does not do the LoRA up products";
    ASSERT_EQ(fuses, inside);
    std::vector<std::vector<int32_t>> next;
    for (uint32_t i = 0; i < kSeqs; ++i) {  // each prompt alone, then one step of all three
      const std::vector<int32_t> prompt = long_prompt(6 + 5 * i, cfg.vocab);
      run_one(*b, std::span(prompt).first(prompt.size() - 1), engine::OutputMode::kLastLogits, i);
      next.push_back({prompt.back()});
    }
    std::vector<engine::SequenceInput> batch;
    for (uint32_t i = 0; i < kSeqs; ++i) {
      batch.push_back({i, next[i], engine::OutputMode::kLastLogits});
    }
    for (const auto& t : b->run(batch)) logits[inside].push_back(t.data);
  }
  for (uint32_t i = 0; i < kSeqs; ++i) {
    const auto d = compare_rows(logits[1][i], logits[0][i], cfg.vocab);
    EXPECT_LT(d.max_abs, kLoraPathTol) << "sequence " << i << ": " << d.str();
  }
  std::filesystem::remove(model);
}

TEST_F(VkForward, StateRoundTripContinuesExactly) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.f32.gguf");
  const auto toks = long_prompt(40, 1024);
  auto b = gpu(model, 256, 3);
  const auto state = test::expect_state_round_trip_exact(*b, toks, 25);

  // The layout is docs/STATE_LAYOUT.md's: the CPU reference leaves the same numbers.
  auto cpu = make_cpu_backend(Rwkv7Model::load(model.string()), {});
  run_one(*cpu, std::span<const int32_t>(toks).first(25), OutputMode::kNone);
  const auto d = compare_rows(state, test::read_state(*cpu, 0), 256);
  std::printf("state after 25 tokens vs cpu: %s\n", d.str().c_str());
  EXPECT_LT(d.max_abs, 1e-4);
}

// The state slots start as one on the device and grow with the slots in use, each state kept
// through the growth: a sequence continued in slot 0 after slot 37 made the buffer grow gives
// the logits of running it alone, and slots never used read back as the zero state.
TEST_F(VkForward, StateSlotsGrowWithTheSlotsInUse) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const auto toks = long_prompt(12, 256);
  const auto first = std::span<const int32_t>(toks).first(7), rest = std::span(toks).subspan(7);
  // (run_one resets its slot first; `go_on` continues the state in the slot.)
  const auto go_on = [&](engine::Backend& be, std::span<const int32_t> t, uint32_t slot) {
    const SequenceInput in{slot, t, OutputMode::kAllLogits};
    return be.run({&in, 1})[0].data;
  };
  auto alone = gpu(model, 256, 1);
  run_one(*alone, first, OutputMode::kNone);
  const auto want = go_on(*alone, rest, 0);

  auto b = gpu(model, 256, 64);
  const uint64_t one = b->load_stats().state_bytes;
  EXPECT_EQ(one, b->hparams().state_floats() * 4);
  run_one(*b, first, OutputMode::kNone);               // slot 0
  run_one(*b, first, OutputMode::kNone, /*slot=*/37);  // grows to 38 slots
  EXPECT_GE(b->load_stats().state_bytes, 38 * one);
  EXPECT_LE(b->load_stats().state_bytes, 64 * one);
  EXPECT_EQ(go_on(*b, rest, 0), want);              // slot 0 kept its state
  const auto untouched = test::read_state(*b, 63);  // past the slots on the device
  EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](float x) { return x == 0; }));
  b->copy_state(37, 63);  // grows to 64
  EXPECT_EQ(b->load_stats().state_bytes, 64 * one);
  EXPECT_EQ(test::read_state(*b, 63), test::read_state(*b, 37));
  EXPECT_THROW(b->write_state(64, test::read_state(*b, 0)), EngineError);
  // Slots that could never fit the device are refused at load; left to the backend (0), as many
  // as fit, at most 256.
  try {
    gpu(model, 256, 4000000000u);
    ADD_FAILURE() << "4e9 slots were taken";
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("ask for"), std::string::npos) << e.what();
  }
  EXPECT_EQ(gpu(model, 256, 0)->n_slots(), 256u);
  // As many as the whole heap holds pass the first bound, not the room beside the model.
  const vk::Device dev;
  VkDeviceSize heap = 0;
  for (uint32_t i = 0; i < dev.mem_props().memoryHeapCount; ++i) {
    heap = std::max(heap, dev.mem_props().memoryHeaps[i].size);
  }
  const uint64_t whole = heap / one;
  ASSERT_LT(whole, uint64_t{UINT32_MAX});
  try {
    gpu(model, 256, static_cast<uint32_t>(whole));
    ADD_FAILURE() << whole << " slots were taken";
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("ask for at most"), std::string::npos) << e.what();
  }
}

TEST_F(VkForward, RejectsBadInputWithoutTouchingState) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  auto b = gpu(model, 256, 2);
  test::expect_rejects_bad_input(*b);
}

// A staging area far smaller than the model: many double-buffered rounds, tensors split
// across them. Same result. (upload_test.cpp shows the forward starting before residency.)
TEST_F(VkForward, SmallStagingUploadsTheSameWeights) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q5_k_m.gguf");
  const auto toks = long_prompt(9, 1024);
  auto ref = gpu(model);
  ref->wait_resident();
  const auto want = run_one(*ref, toks, OutputMode::kAllLogits);
  auto b = gpu(model, 256, 1, [](Tuning& t) { t.staging_bytes = 65536; });
  EXPECT_EQ(run_one(*b, toks, OutputMode::kAllLogits), want);
  b->wait_resident();
  EXPECT_GE(b->load_stats().resident_ms, 0);
}

// The host polls the fence of each forward and state transfer before blocking (on GPUs by
// default; lavapipe blocks unless told): polling returns once the work is done, with its results.
TEST_F(VkForward, PollingTheFenceWaitsForTheWork) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const auto toks = long_prompt(40, 256);
  auto ref = gpu(model, 8);
  const auto want = run_one(*ref, toks, OutputMode::kAllLogits);
  auto b = gpu(model, 8, 1, [](Tuning& t) { t.fence_spin_us = 10000000; });
  EXPECT_EQ(run_one(*b, toks, OutputMode::kAllLogits), want);
  EXPECT_EQ(test::read_state(*b, 0), test::read_state(*ref, 0));
}

TEST_F(VkForward, ReportsLoadTimesAndDispatches) {
  RWKVD_FIXTURE(model, "rwkv7/synthetic-A.q4_k_m.gguf");
  auto b = gpu(model);
  b->wait_resident();
  const LoadStats s = b->load_stats();
  std::printf(
      "load: usable %.1f ms (device %.1f, pipeline cache %.1f, weights %.1f, forward set-up "
      "%.1f; pipelines %.1f beside the weights), resident %.1f ms, %llu weight bytes; %u "
      "dispatches/layer\n",
      s.usable_ms, s.device_ms, s.pipeline_cache_ms, s.weights_setup_ms, s.forward_setup_ms,
      s.pipelines_ms, s.resident_ms, static_cast<unsigned long long>(s.weight_bytes),
      b->dispatches_per_layer());
  EXPECT_GT(s.usable_ms, 0);
  // Parts of usable_ms, each measured.
  EXPECT_GT(s.device_ms, 0);
  EXPECT_GT(s.forward_setup_ms, 0);
  EXPECT_GT(s.weights_setup_ms, 0);
  EXPECT_GT(s.pipelines_ms, 0);
  EXPECT_GT(s.forward_buffers_ms, 0);
  EXPECT_LE(s.readback_ms, s.forward_buffers_ms);
  // The pipelines made beside the weights' set-up are every one the forward needs.
  EXPECT_EQ(s.late_pipelines, 0u);
  EXPECT_LE(s.device_ms + s.pipeline_cache_ms + s.weights_setup_ms + s.forward_setup_ms,
            s.usable_ms);
  EXPECT_GE(s.resident_ms, 0);
  EXPECT_LE(b->dispatches_per_layer(), 12u);

  // The reported variants follow the device's own features.
  const std::vector<std::string> f = b->device_features();
  std::string joined;
  for (const std::string& x : f) joined += x + " ";
  std::printf("device features: %s\n", joined.c_str());
  const auto has = [&](const std::string& x) {
    return std::find(f.begin(), f.end(), x) != f.end();
  };
  const vk::Device dev;
  const vk::DeviceFeatures& df = dev.features();
  EXPECT_EQ(has("subgroup_size=" + std::to_string(df.subgroup_size)), df.subgroup_arith);
  // Tensor cores through VK_NV_cooperative_matrix where offered (unless Tuning::mc_khr), else
  // through VK_KHR_cooperative_matrix; F16 weights from split inputs on NV's (by default).
  const bool khr = df.khr_m != 0 && (!df.coopmat || dev.tuning().mc_khr);
  EXPECT_EQ(has("tensor_cores"), df.coopmat || khr);
  EXPECT_EQ(has("tensor_cores_f16_split_inputs"), df.coopmat && !khr);
  EXPECT_EQ(has("tensor_cores_khr=" + std::to_string(df.khr_m) + "x" + std::to_string(df.khr_n) +
                "x" + std::to_string(df.khr_k)),
            khr);
  if (test::coopmat_required()) {
    EXPECT_TRUE(has("tensor_cores"));
  }
  EXPECT_EQ(has("transfer_queue"), dev.dedicated_transfer());
  EXPECT_NE(has("wkv_subgroup"), has("wkv_portable"));
}

}  // namespace
}  // namespace rwkvd::engine
