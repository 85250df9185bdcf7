// GPU time of single kernels in isolation, from timestamp queries around a chain of identical
// dispatches (Google Benchmark, manual time = GPU time per dispatch). Answers what a profile of
// the whole forward cannot: what one dependent dispatch costs on its own (a near-empty product,
// with and without a barrier after it), and how close each product gets to the memory or
// arithmetic bound at the shapes of a real model.
//
//   vk_kernel_bench [--diag=NAME] [--benchmark_filter=REGEX]
//
// RWKVD_VK_TUNING=file.json overrides tuning values as in rwkvd (docs/VULKAN.md). --diag puts a
// diagnostic build in place of a kernel (results wrong, so only this binary embeds them:
// shaders/CMakeLists.txt rwkvd_bench_shader): mvq_a, mvq_c, mvq_d, mvq_e, mvq_q (mvq.comp with
// parts of its loop taken away, shaders/mvq_diag.glsl), wkv_long_a, wkv_long_b (wkv_long.comp
// without phase A or B), wkv_lora (wkv_sg.comp's LoRA up phase without its weights' loads).
//
// Weights live in device-local memory filled with a fixed byte pattern (timing only: the values
// do not matter, every pattern is finite), activations are zero. A chain cycles through copies of
// the weights that together exceed the GPU's L2 (256 MB), so that every dispatch streams its
// weights from memory as in a forward: one copy of a 2.9B product (15 MB of Q4_K) stays in the
// H100's 50 MB L2 and timed 1.5-2x faster than the same product does inside a forward.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ggml_type.h"
#include "engine/vk/buffer.h"
#include "engine/vk/commands.h"
#include "engine/vk/device.h"
#include "engine/vk/device_layout.h"
#include "engine/vk/kernels.h"
#include "engine/vk/pipelines.h"
#include "engine/vk/vk_check.h"
#include "shaders/shaders.h"

namespace {

using namespace rwkvd::engine;
using namespace rwkvd::engine::vk;

constexpr uint32_t kChain = 64;                       // dispatches between the two timestamps
constexpr uint64_t kColdBytes = uint64_t{256} << 20;  // weight copies a chain cycles through

std::string g_diag;  // --diag

std::span<const uint32_t> bench_shader(std::string_view name) {
  for (const rwkvd::shaders::Shader& s : rwkvd::shaders::bench_only()) {
    if (s.name == name) return s.words;
  }
  throw std::runtime_error("no bench shader " + std::string(name));
}

// The bench's own shaders: grid_sync, and the diagnostic build --diag names in its kernel's place.
void use_bench_shaders(Pipelines& pipes) {
  pipes.use_shader("grid_sync", bench_shader("grid_sync"));
  if (g_diag.empty()) return;
  if (g_diag.size() == 5 && g_diag.starts_with("mvq_")) {
    for (const char* t : {"q4_k", "q5_k", "q6_k"}) {
      pipes.use_shader(std::string("mvq_") + t,
                       bench_shader("mvq_diag_" + g_diag.substr(4) + "_" + t));
    }
  } else if (g_diag == "wkv_long_a" || g_diag == "wkv_long_b") {
    pipes.use_shader("wkv_long", bench_shader("wkv_long_diag_" + g_diag.substr(9)));
  } else if (g_diag == "wkv_lora") {
    pipes.use_shader("wkv_sg", bench_shader("wkv_sg_diag_l"));
  } else {
    throw std::runtime_error("unknown --diag " + g_diag);
  }
  std::fprintf(stderr, "diagnostic build %s: results wrong, times only\n", g_diag.c_str());
}

struct Gpu {
  Gpu() : pipes(dev), kernels(dev, pipes), cmds(dev) {
    use_bench_shaders(pipes);  // (Kernels makes no pipeline before it records)
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    RWKVD_VK(vkCreateQueryPool(dev.device(), &qi, nullptr, &queries));
    std::fprintf(stderr, "device: %s, coopmat %d, subgroup %u, shared memory %u bytes\n",
                 dev.name().c_str(), dev.features().coopmat ? 1 : 0, dev.features().subgroup_size,
                 dev.props().limits.maxComputeSharedMemorySize);
  }
  ~Gpu() { vkDestroyQueryPool(dev.device(), queries, nullptr); }

  // Seconds of GPU time per dispatch of `record` (called kChain times, with i = 0 .. kChain - 1).
  double time(const std::function<void(VkCommandBuffer, uint32_t)>& one, bool barriers) {
    cmds.run_now([&](VkCommandBuffer cb) {
      vkCmdResetQueryPool(cb, queries, 0, 2);
      Kernels::barrier(cb);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
      for (uint32_t i = 0; i < kChain; ++i) {
        one(cb, i);
        if (barriers) kernels.compute_barrier(cb);
      }
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
    });
    uint64_t t[2];
    RWKVD_VK(vkGetQueryPoolResults(dev.device(), queries, 0, 2, sizeof(t), t, 8,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    return static_cast<double>(t[1] - t[0]) * dev.props().limits.timestampPeriod * 1e-9 / kChain;
  }

  Device dev;
  Pipelines pipes;
  Kernels kernels;
  Commands cmds;
  VkQueryPool queries = VK_NULL_HANDLE;
};

Gpu& gpu() {
  static Gpu g;
  return g;
}

// One product y[T][N] = W[N][K] x[T][K] of `type`, weights device-local.
struct Product {
  // form 1: the product reads the inputs' int8 form (mvq.comp), 2: their fp16 form (mc.comp on
  // tensor cores); written once here.
  Product(GgmlType weight_type, uint32_t K, uint32_t N, uint32_t tokens, int form = 0)
      : type(weight_type), T(tokens) {
    Gpu& g = gpu();
    const uint32_t rb = static_cast<uint32_t>(device_row_bytes(weight_type, K));
    bytes = uint64_t{rb} * N;
    const uint64_t stride = (bytes + 64 + 255) / 256 * 256;
    const auto copies = static_cast<uint32_t>(std::clamp<uint64_t>(kColdBytes / stride, 1, kChain));
    weights = Buffer(g.dev, stride * copies, MemKind::kDevice);
    const uint32_t q_off = T * K + T * N;
    const uint32_t h_off = q_off + T * q8_row_floats(K);
    // Split-K partial sums (mc.comp): room for 8 parts, as the forward has in its logits.
    const uint32_t part_off = h_off + T * K / 2;
    act = Buffer(g.dev, (uint64_t{part_off} + uint64_t{T} * 8 * N) * 4, MemKind::kDevice);
    small = Buffer(g.dev, 4096, MemKind::kDevice);
    g.cmds.run_now([&](VkCommandBuffer cb) {
      vkCmdFillBuffer(cb, weights.handle(), 0, VK_WHOLE_SIZE, 0x3a3b3c3du);  // finite halves
      vkCmdFillBuffer(cb, act.handle(), 0, VK_WHOLE_SIZE, 0);
      vkCmdFillBuffer(cb, small.handle(), 0, VK_WHOLE_SIZE, 0);
    });
    pool = std::make_unique<DescriptorSets>(g.dev, g.pipes.set_layout(), copies);
    for (uint32_t c = 0; c < copies; ++c) {
      SetBindings b;
      b.meta = b.vecs = b.state = {small.handle(), 0, VK_WHOLE_SIZE};
      b.act = {act.handle(), 0, VK_WHOLE_SIZE};
      for (auto& w : b.weights) w = {weights.handle(), c * stride, stride};
      sets.push_back(pool->make(b));
    }
    slot = {K, N, 0, T * K, MmMode::kStore, rb};
    slot.part_off = part_off;
    slot.part_width = 8 * N;
    // Forms 2 and 3: F32 weights as the LoRA products of quantised models (on tensor cores).
    slot.half_ok = type == GgmlType::F32 && form >= 2;
    if (form == 2) {
      slot.h16_off = h_off;
      if (!g.kernels.reads_h16(type, {&slot, 1}, T)) throw std::runtime_error("no fp16 form here");
      const Kernels::HalfRegion region{K, 0, h_off};
      g.cmds.run_now([&](VkCommandBuffer cb) { g.kernels.to_half(cb, sets[0], T, {&region, 1}); });
    }
    if (form == 1) {
      if (!g.kernels.reads_q8(type, T)) throw std::runtime_error("no int8 product here");
      slot.q8_off = q_off;
      g.cmds.run_now(
          [&](VkCommandBuffer cb) { g.kernels.quantize_q8(cb, sets[0], K, T, 0, q_off); });
    }
  }
  void record(VkCommandBuffer cb, uint32_t i) {
    gpu().kernels.mm(cb, sets[i % sets.size()], type, {&slot, 1}, T);
  }

  GgmlType type;
  uint32_t T;
  uint64_t bytes = 0;
  Buffer weights, act, small;
  std::unique_ptr<DescriptorSets> pool;
  std::vector<VkDescriptorSet> sets;  // one per copy of the weights
  MmSlot slot;
};

void run(benchmark::State& state, Product& p, bool barriers) {
  double per = 0;
  for (auto _ : state) {
    per = gpu().time([&](VkCommandBuffer cb, uint32_t i) { p.record(cb, i); }, barriers);
    state.SetIterationTime(per);
  }
  const double flops = 2.0 * p.slot.K * p.slot.N * p.T;
  state.counters["us"] = per * 1e6;
  state.counters["GB/s"] = static_cast<double>(p.bytes) / per * 1e-9;
  state.counters["TFLOP/s"] = flops / per * 1e-12;
}

// A product that moves almost nothing: what a dependent dispatch costs by itself.
void BM_EmptyDispatch(benchmark::State& state) {
  Product p(GgmlType::F32, 32, 1, 1);
  run(state, p, state.range(0) != 0);
}
BENCHMARK(BM_EmptyDispatch)->ArgName("barrier")->Arg(1)->Arg(0)->UseManualTime()->Iterations(10);

// A descriptor set over a kernel's buffers that reads no weights (their bindings get vecs).
VkDescriptorSet row_kernel_set(DescriptorSets& pool, Buffer& meta, Buffer& act, Buffer& vecs,
                               Buffer& st) {
  SetBindings b;
  b.meta = {meta.handle(), 0, VK_WHOLE_SIZE};
  b.act = {act.handle(), 0, VK_WHOLE_SIZE};
  b.vecs = {vecs.handle(), 0, VK_WHOLE_SIZE};
  b.state = {st.handle(), 0, VK_WHOLE_SIZE};
  for (auto& w : b.weights) w = b.vecs;
  return pool.make(b);
}

// A device-wide wait inside one dispatch (shaders/grid_sync.comp: workgroups count their
// arrivals on an atomic and spin) against a dispatch boundary with a barrier (BM_EmptyDispatch):
// what a persistent decode kernel would pay for each of a layer's ~8 dependent steps. The wait's
// price: (us at P phases - us at 1) / (P - 1). GPUs only: every workgroup must be resident.
void BM_GridBarrier(benchmark::State& state) {
  Gpu& g = gpu();
  if (g.dev.props().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    state.SkipWithError("a CPU device does not hold every workgroup at once");
    return;
  }
  const auto wgs = static_cast<uint32_t>(state.range(0));
  const auto phases = static_cast<uint32_t>(state.range(1));
  Buffer sync(g.dev, (1 + uint64_t{wgs} * 64) * 4, MemKind::kDevice);
  Buffer small(g.dev, 4096, MemKind::kDevice);
  DescriptorSets pool(g.dev, g.pipes.set_layout(), 1);
  const VkDescriptorSet set = row_kernel_set(pool, small, sync, small, small);
  const VkPipeline pipe = g.pipes.get("grid_sync", {});
  double per = 0;
  for (auto _ : state) {
    g.cmds.run_now([&](VkCommandBuffer cb) { vkCmdFillBuffer(cb, sync.handle(), 0, 4, 0); });
    per = g.time(
        [&](VkCommandBuffer cb, uint32_t i) {
          const uint32_t pc[2] = {phases, i * phases * wgs};
          vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
          vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, g.pipes.layout(), 0, 1, &set,
                                  0, nullptr);
          vkCmdPushConstants(cb, g.pipes.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc), pc);
          vkCmdDispatch(cb, wgs, 1, 1);
        },
        true);
    state.SetIterationTime(per);
  }
  state.counters["us"] = per * 1e6;
}
BENCHMARK(BM_GridBarrier)
    ->ArgNames({"workgroups", "phases"})
    ->ArgsProduct({{66, 132, 264}, {1, 2, 9}})
    ->UseManualTime()
    ->Iterations(10);

// The time-mix shift (shift.comp) of T tokens at the 2.9B width (D 2560): LayerNorm, token shift
// from the state (every token at its sequence's first position, as in decode), six lerps, the
// int8 forms of three of them (r, k, v), the commit of a saved row. At one token the kernel is a
// chain of memory latencies and barriers, not bytes.
void BM_Shift(benchmark::State& state) {
  constexpr uint32_t D = 2560;
  const auto T = static_cast<uint32_t>(state.range(0));
  Gpu& g = gpu();
  const uint32_t q8_stride = T * q8_row_floats(D), q8_off = 8 * T * D;
  Buffer act(g.dev, (uint64_t{q8_off} + 6 * q8_stride) * 4, MemKind::kDevice);
  Buffer vecs(g.dev, 8 * D * 4, MemKind::kDevice), st(g.dev, 4 * D * 4, MemKind::kDevice);
  Buffer meta(g.dev, 4096, MemKind::kDevice);  // zeros: every token sequence 0's first, slot 0
  g.cmds.run_now([&](VkCommandBuffer cb) {
    for (Buffer* b : {&act, &vecs, &st, &meta})
      vkCmdFillBuffer(cb, b->handle(), 0, VK_WHOLE_SIZE, 0);
  });
  DescriptorSets pool(g.dev, g.pipes.set_layout(), 1);
  const VkDescriptorSet set = row_kernel_set(pool, meta, act, vecs, st);
  const ShiftArgs a{D,     6, 0,         T * D, T * D, 7 * T * D, 0,       D,      2 * D,    0,
                    4 * D, 1, 7 * T * D, 2 * D, 4 * T, 1e-5f,     0b1101u, q8_off, q8_stride};
  double per = 0;
  for (auto _ : state) {
    per = g.time([&](VkCommandBuffer cb, uint32_t) { g.kernels.shift(cb, set, a, T); }, true);
    state.SetIterationTime(per);
  }
  state.counters["us"] = per * 1e6;
}
BENCHMARK(BM_Shift)->ArgName("T")->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->Iterations(10);

// wkv of one long chunk of one sequence at the 2.9B shape (40 heads of 64): the document's
// recurrence, which a forward cannot time apart from its other dispatches without the profiler's
// timestamps between them. T = 512 and the 854-token email. Tuning values (wkv_slices,
// wkv_pipelined, wkv_long_block) and --diag=wkv_long_a / _b select the kernel and its shape.
void BM_Wkv(benchmark::State& state) {
  constexpr uint32_t D = 2560, N = 64, H = D / N;
  const auto T = static_cast<uint32_t>(state.range(0));
  Gpu& g = gpu();
  Buffer act(g.dev, uint64_t{9} * T * D * 4, MemKind::kDevice);
  Buffer vecs(g.dev, 8 * D * 4, MemKind::kDevice), st(g.dev, (N + 2) * D * 4, MemKind::kDevice);
  Buffer meta(g.dev, (4 * T + 4) * 4, MemKind::kUpload);
  g.cmds.run_now([&](VkCommandBuffer cb) {
    for (Buffer* b : {&act, &vecs, &st}) vkCmdFillBuffer(cb, b->handle(), 0, VK_WHOLE_SIZE, 0);
  });
  auto* m = static_cast<uint32_t*>(meta.mapped());
  std::fill(m, m + 4 * T + 4, 0u);
  m[4 * T + 2] = T;  // sequence 0: slot 0, first token 0, T tokens
  DescriptorSets pool(g.dev, g.pipes.set_layout(), 1);
  const VkDescriptorSet set = row_kernel_set(pool, meta, act, vecs, st);
  const uint32_t R = T * D;  // act regions: r, k, v, wl, al, vl, g, vf, y
  const WkvArgs a{D, 0,     R,     2 * R, 3 * R, 4 * R, 5 * R, 6 * R, 7 * R,       8 * R, 0,
                  D, 2 * D, 3 * D, 4 * D, 5 * D, 6 * D, 7 * D, 0,     (N + 2) * D, 0,     4 * T};
  double per = 0;
  for (auto _ : state) {
    per =
        g.time([&](VkCommandBuffer cb, uint32_t) { g.kernels.wkv(cb, set, a, H, N, 1, T); }, true);
    state.SetIterationTime(per);
  }
  state.counters["us"] = per * 1e6;
}
BENCHMARK(BM_Wkv)->ArgName("T")->Arg(512)->Arg(854)->UseManualTime()->Iterations(10);

// wkv of one decoded token at the 2.9B shape, with its LoRA up products (F32 up weights of ranks
// 96, 96, 64, 320, as Q4_K_M files hold them: ~150 KB a head) inside (lora 1), as decode runs it,
// or without (lora 0: the products ran before): the largest step of a decode layer in the
// profile, where 40 workgroups read 5.9 MB.
void BM_WkvDecode(benchmark::State& state) {
  constexpr uint32_t D = 2560, N = 64, H = D / N;
  constexpr uint32_t kRanks[4] = {96, 96, 320, 64};  // w2, a2, g2, v2: weights 0..3
  const bool lora = state.range(0) != 0;
  Gpu& g = gpu();
  Buffer act(g.dev, uint64_t{16} * D * 4, MemKind::kDevice);
  Buffer vecs(g.dev, 8 * D * 4, MemKind::kDevice), st(g.dev, (N + 2) * D * 4, MemKind::kDevice);
  Buffer meta(g.dev, 8 * 4, MemKind::kUpload);
  const uint64_t up_bytes = uint64_t{D} * 320 * 4;  // the largest; each matrix at its own offset
  Buffer ups(g.dev, 4 * up_bytes, MemKind::kDevice);
  g.cmds.run_now([&](VkCommandBuffer cb) {
    for (Buffer* b : {&act, &vecs, &st, &ups})
      vkCmdFillBuffer(cb, b->handle(), 0, VK_WHOLE_SIZE, 0);
  });
  auto* m = static_cast<uint32_t*>(meta.mapped());
  std::fill(m, m + 8, 0u);
  m[4 + 2] = 1;  // sequence 0: slot 0, first token 0, one token
  DescriptorSets pool(g.dev, g.pipes.set_layout(), 1);
  SetBindings b;
  b.meta = {meta.handle(), 0, VK_WHOLE_SIZE};
  b.act = {act.handle(), 0, VK_WHOLE_SIZE};
  b.vecs = {vecs.handle(), 0, VK_WHOLE_SIZE};
  b.state = {st.handle(), 0, VK_WHOLE_SIZE};
  for (uint32_t i = 0; i < 4; ++i) b.weights[i] = {ups.handle(), i * up_bytes, up_bytes};
  const VkDescriptorSet set = pool.make(b);
  WkvArgs a{D, 0,     D,     2 * D, 3 * D, 4 * D, 5 * D, 6 * D, 7 * D,       8 * D, 0,
            D, 2 * D, 3 * D, 4 * D, 5 * D, 6 * D, 7 * D, 0,     (N + 2) * D, 0,     4};
  if (lora) {
    a.flags |= kWkvLora;
    a.hw_off = 9 * D;
    a.ha_off = 10 * D;
    a.hg_off = 11 * D;
    a.hv_off = 12 * D;
    a.rank_w = kRanks[0];
    a.rank_a = kRanks[1];
    a.rank_g = kRanks[2];
    a.rank_v = kRanks[3];
    if (!g.kernels.wkv_fuses_lora(N, 576)) throw std::runtime_error("no LoRA inside wkv here");
  }
  double per = 0;
  for (auto _ : state) {
    per =
        g.time([&](VkCommandBuffer cb, uint32_t) { g.kernels.wkv(cb, set, a, H, N, 1, 1); }, true);
    state.SetIterationTime(per);
  }
  state.counters["us"] = per * 1e6;
}
BENCHMARK(BM_WkvDecode)->ArgName("lora")->Arg(0)->Arg(1)->UseManualTime()->Iterations(10);

// Two products of one step of the forward with no barrier between them, a barrier after both:
// whether the GPU runs two dispatches at once (then the pair costs about the longer of the two)
// or one after the other (their sum). The 2.9B decode step before wkv at one token: the LoRA
// down products (F32 2560 -> 576, mv.comp) and r, k, v (Q4_K 2560 -> 3 x 2560, int8, mvq.comp).
// mode 0: LoRA down alone, 1: r, k, v alone, 2: both, LoRA down first (the forward's order),
// 3: both, barrier between, 4: r, k, v twice (one pipeline), 5: LoRA down twice. H100, us:
// 9.4, 11.7, 15.8, 21.2, 17.6, 11.8: they overlap in part (splitting the LoRA down products' K
// over subgroups took mode 0 to 7.9 and mode 2 to 24.4, and was dropped).
void BM_Pair(benchmark::State& state) {
  const auto mode = state.range(0);
  if (!gpu().kernels.reads_q8(GgmlType::Q4_K, 1)) {
    state.SkipWithError("the device has no int8 product");
    return;
  }
  // Each dispatch of the mode's chain, a barrier where nullptr stands.
  std::vector<std::unique_ptr<Product>> owned;
  const auto lora = [&] {
    return owned.emplace_back(std::make_unique<Product>(GgmlType::F32, 2560, 576, 1)).get();
  };
  const auto rkv = [&] {
    return owned.emplace_back(std::make_unique<Product>(GgmlType::Q4_K, 2560, 7680, 1, 1)).get();
  };
  std::vector<Product*> chain;
  switch (mode) {
    case 0:
      chain = {lora()};
      break;
    case 1:
      chain = {rkv()};
      break;
    case 2:
      chain = {lora(), rkv()};
      break;
    case 3:
      chain = {lora(), nullptr, rkv()};
      break;
    case 4:
      chain = {rkv(), rkv()};
      break;
    default:
      chain = {lora(), lora()};
      break;
  }
  double per = 0;
  for (auto _ : state) {
    per = gpu().time(
        [&](VkCommandBuffer cb, uint32_t i) {
          for (Product* p : chain) {
            if (p == nullptr) {
              gpu().kernels.compute_barrier(cb);
            } else {
              p->record(cb, i);
            }
          }
        },
        true);
    state.SetIterationTime(per);
  }
  state.counters["us"] = per * 1e6;
}
BENCHMARK(BM_Pair)->ArgName("mode")->DenseRange(0, 5)->UseManualTime()->Iterations(10);

// Decode (T tokens) and prefill products at the 2.9B model's shapes (D 2560, ffn 10240).
void BM_Product(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const auto form = static_cast<int>(state.range(5));
  const auto K = static_cast<uint32_t>(state.range(1)), T = static_cast<uint32_t>(state.range(3));
  if (form == 1 && !gpu().kernels.reads_q8(type, T)) {
    state.SkipWithError("the device has no int8 product for this type");
    return;
  }
  if (form == 2 && !gpu().kernels.uses_coopmat(type, K, T, type == GgmlType::F32)) {
    state.SkipWithError("the device runs no tensor-core product here");
    return;
  }
  if (form == 2 && gpu().kernels.splits_inputs(type)) {
    state.SkipWithError("tensor cores take this type's float inputs (split in two halves)");
    return;
  }
  Product p(type, K, static_cast<uint32_t>(state.range(2)), T, form);
  state.SetLabel(std::string(ggml_traits(type).name) + (state.range(4) ? " barrier" : " overlap") +
                 (form == 1   ? " int8"
                  : form == 2 ? " fp16 inputs"
                  : form == 3 ? " half_ok"
                              : ""));
  run(state, p, state.range(4) != 0);
}
void product_args(benchmark::internal::Benchmark* b) {
  // form: 0 float, 1 int8, 2 fp16, 3 float with MmSlot::half_ok (LoRA products of quantised
  // models: F32 weights on tensor cores)
  b->ArgNames({"type", "K", "N", "T", "barrier", "form"});
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16, GgmlType::F32}) {
    const auto ti = static_cast<int64_t>(t);
    for (const auto& [K, N] : {std::pair{2560, 10240}, {10240, 2560}, {2560, 2560}}) {
      b->Args({ti, K, N, 1, 1, 0});
      b->Args({ti, K, N, 1, 0, 0});
      // A few sequences decoding together (gen-8, field analysis): what each token adds.
      for (int64_t T : {2, 4, 8}) b->Args({ti, K, N, T, 1, 0});
      b->Args({ti, K, N, 512, 1, 0});
      b->Args({ti, K, N, 512, 1, 2});
      if (t == GgmlType::Q4_K) {  // shorter chunks, the email's 854 tokens in one, a full one
        for (int64_t T : {64, 128, 256, 854, 1024}) b->Args({ti, K, N, T, 1, 2});
      }
      if (t == GgmlType::Q4_K || t == GgmlType::Q6_K) {  // the same from int8 inputs
        for (int64_t T : {1, 2, 4, 8, 16}) b->Args({ti, K, N, T, 1, 1});
        b->Args({ti, K, N, 1, 0, 1});
        // And on tensor cores from fp16 inputs (mcd.comp; T = 1 with mcd_min_t 1).
        for (int64_t T : {1, 2, 4, 8, 16}) b->Args({ti, K, N, T, 1, 2});
      }
    }
  }
  // 0.1B's one-token products from int8 inputs (768 -> 3072, 3072 -> 768, 768 -> 768): with
  // the tuning value max_row_groups, what a persistent kernel's capped grid would cost them.
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (const auto& [K, N] : {std::pair{768, 3072}, {3072, 768}, {768, 768}}) {
      b->Args({static_cast<int64_t>(t), K, N, 1, 1, 1});
      b->Args({static_cast<int64_t>(t), K, N, 1, 0, 1});
    }
  }
  // And 0.1B's head (Q6_K 65536 x 768, 41 MB): rows of 24 pieces leave a subgroup's 32 lanes
  // one step each, so what a row costs besides its bytes shows here.
  b->Args({static_cast<int64_t>(GgmlType::Q6_K), 768, 65536, 1, 1, 1});
  // The LoRA down products of a 2.9B layer at one token (F32, four weights of 96, 96, 64 and 320
  // rows in one dispatch in the forward; here as one of 576).
  for (int64_t T : {1, 2, 4, 6, 8, 16}) {
    b->Args({static_cast<int64_t>(GgmlType::F32), 2560, 576, T, 1, 0});
  }
  // And on tensor cores from their fp16 form (MmSlot::half_ok), as in prefill.
  for (int64_t T : {64, 256, 512, 854}) {
    b->Args({static_cast<int64_t>(GgmlType::F32), 2560, 576, T, 1, 2});
  }
  // The LoRA up products of a long chunk of 2.9B (F32 of ranks 64, 96 and 320 -> 2560, on tensor
  // cores from float inputs), the email's 854 tokens.
  for (int64_t K : {64, 96, 320}) {
    for (int64_t form : {0, 3})
      b->Args({static_cast<int64_t>(GgmlType::F32), K, 2560, 854, 1, form});
  }
  // The head of 2.9B Q4_K_M files (Q6_K, 65536 x 2560) for one token, and for a few from int8
  // inputs and on tensor cores (which of the two a few sequences' head should take).
  const auto q6 = static_cast<int64_t>(GgmlType::Q6_K);
  b->Args({q6, 2560, 65536, 1, 1, 0});
  b->Args({static_cast<int64_t>(GgmlType::F16), 2560, 65536, 1, 1, 0});  // F16 files' head
  for (int64_t T : {1, 4, 8, 16}) b->Args({q6, 2560, 65536, T, 1, 1});
  for (int64_t T : {4, 8, 16}) b->Args({q6, 2560, 65536, T, 1, 2});
  // Q4_K at the head's size from int8 inputs: long enough that launch, ramp-up and tail vanish,
  // so mvq.comp's streaming rate alone (against the F16 head's, mvf.comp).
  b->Args({static_cast<int64_t>(GgmlType::Q4_K), 2560, 65536, 1, 1, 1});
}
BENCHMARK(BM_Product)->Apply(product_args)->UseManualTime()->Iterations(10);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a.starts_with("--diag=")) {
      g_diag = a.substr(7);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
