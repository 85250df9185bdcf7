#include "tools/bench_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/backend.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "tools/device.h"

namespace rwkvd::tools {
namespace {

using bench::Clock;
using bench::ms_since;
using bench::pseudo_tokens;

// Greedy decoding of `steps` tokens for every slot in `slots`: feeds next[i] and replaces it
// with the argmax of the logits, `steps` times; returns the fed ids per slot (next[] then holds
// the token after them, not yet fed). One Backend::run per step for all slots together. The
// argmax is the engine's (kLastArgmax), as the worker asks for a greedy request's; with
// `logits_out` each logits row comes to the host and the argmax runs there (as a request that
// samples at a temperature, or llama.cpp's loop, gets them).
std::vector<std::vector<int32_t>> greedy(engine::Backend& b, const std::vector<uint32_t>& slots,
                                         std::vector<int32_t>& next, int steps,
                                         bool logits_out = false) {
  std::vector<std::vector<int32_t>> out(slots.size());
  std::vector<engine::SequenceInput> batch(slots.size());
  const engine::OutputMode mode =
      logits_out ? engine::OutputMode::kLastLogits : engine::OutputMode::kLastArgmax;
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < slots.size(); ++i) batch[i] = {slots[i], {&next[i], 1}, mode};
    const auto res = b.run(batch);
    for (size_t i = 0; i < slots.size(); ++i) {
      out[i].push_back(next[i]);
      next[i] = logits_out ? engine::argmax(res[i].data) : static_cast<int32_t>(res[i].data[0]);
    }
  }
  return out;
}

}  // namespace

void run_engine_bench(const BenchOptions& o, BenchReport& report) {
  const int R = std::max(1, o.repeats);
  const bench::Sizes sizes(o);
  const int gen_steps = o.quick ? 16 : 128;
  const std::vector<size_t> prefill_sizes =
      o.quick ? std::vector<size_t>{64, 256} : std::vector<size_t>{512, 4096};
  // 4: the most sequences a decode step runs on the int8 products; 8 and 32 run on tensor cores
  // where the device has them.
  const std::vector<uint32_t> gen_batches{1, 4, 8, 32};
  const size_t n_docs = sizes.n_docs, doc_len = sizes.doc_len, coalesce = 32;

  engine::BackendOptions bo;
  bo.n_slots = 64;
  // As `rwkvd serve` (its --max-chunk): the email's 854 tokens are one forward.
  bo.max_chunk = 1024;
  bo.n_threads = o.threads;

  bench::phase("engine: load");
  // Load: a fresh backend per repeat on the process's one GPU device, made first (as llama.cpp's
  // load figure keeps its Vulkan backend's device); the page cache is warm after the first.
  const auto device_t0 = Clock::now();
  const std::shared_ptr<engine::VkContext> gpu = open_gpu_context(o.device);
  if (gpu != nullptr) report.add("load.device_ms", "ms", ms_since(device_t0));
  std::unique_ptr<engine::Backend> b;
  for (int r = 0; r < R; ++r) {
    b.reset();
    const auto t0 = Clock::now();
    b = open_backend(o.model, o.device, bo, gpu);
    const int32_t tok = 1;
    const engine::SequenceInput first{0, {&tok, 1}, engine::OutputMode::kLastLogits};
    b->run({&first, 1});
    report.add("load.first_token_ms", "ms", ms_since(t0));
    // The GPU uploads in the background; resident_ms is negative until the last byte landed.
    engine::LoadStats ls = b->load_stats();
    while (ls.resident_ms < 0 && ms_since(t0) < 600'000) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ls = b->load_stats();
    }
    report.add("load.usable_ms", "ms", ls.usable_ms);
    report.add("load.resident_ms", "ms", ls.resident_ms);
    if (gpu != nullptr) {  // the GPU's parts of usable_ms
      report.add("load.weights_setup_ms", "ms", ls.weights_setup_ms);
      report.add("load.forward_setup_ms", "ms", ls.forward_setup_ms);
      report.add("load.pipelines_ms", "ms", ls.pipelines_ms);
      report.add("load.forward_buffers_ms", "ms", ls.forward_buffers_ms);
      report.add("load.readback_ms", "ms", ls.readback_ms);
    }
  }
  const engine::Rwkv7Hparams hp = b->hparams();
  const engine::LoadStats ls = b->load_stats();
  report.set_context("device", b->device_name());
  report.set_context("device_features", b->device_features());
  report.set_context("page_cache", "warm (not dropped)");
  report.set_context(
      "memory_bytes",
      {{"weights", ls.weight_bytes}, {"states", ls.state_bytes}, {"scratch", ls.scratch_bytes}});
  report.set_context("model_shape", {{"n_layer", hp.n_layer},
                                     {"n_embd", hp.n_embd},
                                     {"n_vocab", hp.n_vocab},
                                     {"n_ffn", hp.n_ffn}});

  bench::phase("engine: tokenize");
  // Tokenize the document.
  auto model = engine::Rwkv7Model::load(o.model);
  auto tok = engine::WorldTokenizer::from_gguf(model->file());
  const std::string doc = bench::document(o);
  std::vector<int32_t> doc_ids;
  for (int r = 0; r < R; ++r) {
    const int n = 200;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) doc_ids = tok->encode(doc);
    report.add("tokenize.email_us", "us", ms_since(t0) * 1000.0 / n);
  }
  for (auto& id : doc_ids) id = std::min<int32_t>(id, static_cast<int32_t>(hp.n_vocab) - 1);
  report.set_context("doc_tokens", doc_ids.size());

  for (size_t n : prefill_sizes) {
    const auto toks = pseudo_tokens(n, hp.n_vocab, n);
    bench::phase("engine: prefill " + std::to_string(n));
    for (int r = 0; r < R; ++r) {
      b->reset_state(0);
      const engine::SequenceInput in{0, toks, engine::OutputMode::kLastLogits};
      const auto t0 = Clock::now();
      b->run({&in, 1});
      report.add("prefill." + std::to_string(n) + ".tok_s", "tok/s", n / (ms_since(t0) / 1000));
    }
  }

  for (uint32_t bs : gen_batches) {
    std::vector<uint32_t> slots(bs);
    std::iota(slots.begin(), slots.end(), 0u);
    bench::phase("engine: generate, batch of " + std::to_string(bs));
    for (int r = 0; r < R; ++r) {
      for (uint32_t s : slots) b->reset_state(s);
      auto next = pseudo_tokens(bs, hp.n_vocab, 7 + r);
      const auto t0 = Clock::now();
      greedy(*b, slots, next, gen_steps);
      report.add("gen.b" + std::to_string(bs) + ".tok_s", "tok/s",
                 static_cast<double>(bs) * gen_steps / (ms_since(t0) / 1000));
    }
  }
  bench::phase("engine: generate, logits to the host");
  for (int r = 0; r < R; ++r) {  // one sequence, its logits row to the host every step
    b->reset_state(0);
    auto next = pseudo_tokens(1, hp.n_vocab, 7 + r);
    const auto t0 = Clock::now();
    greedy(*b, {0}, next, gen_steps, true);
    report.add("gen.b1_logits.tok_s", "tok/s", gen_steps / (ms_since(t0) / 1000));
  }

  bench::phase("engine: document state");
  // Document -> state in host memory (the engine part of the client's doc-state figure).
  std::vector<float> state(hp.state_floats());
  for (int r = 0; r < R; ++r) {
    b->reset_state(0);
    const engine::SequenceInput in{0, doc_ids, engine::OutputMode::kNone};
    const auto t0 = Clock::now();
    b->run({&in, 1});
    b->read_state(0, state);
    report.add("doc_state.engine_ms", "ms", ms_since(t0));
  }
  report.set_context("state_floats", state.size());
  bench::phase("engine: state transfers");
  // A state slot to and from host memory alone (the session reads and writes of the client's
  // figures: a document's state in a reply, a session opened from a state).
  for (int r = 0; r < R; ++r) {
    auto t0 = Clock::now();
    b->read_state(0, state);
    report.add("state.read_ms", "ms", ms_since(t0));
    t0 = Clock::now();
    b->write_state(1, state);
    report.add("state.write_ms", "ms", ms_since(t0));
  }
  bench::phase("engine: documents of new lengths");
  // The same for documents of lengths the engine has not run before (the email less 1, 2, ..
  // tokens): each forward's shape is new, so its commands are recorded first, as for most
  // documents a worker sees.
  for (int r = 0; r < R && static_cast<size_t>(r) + 1 < doc_ids.size(); ++r) {
    b->reset_state(0);
    const std::span<const int32_t> shorter(doc_ids.data(),
                                           doc_ids.size() - 1 - static_cast<size_t>(r));
    const engine::SequenceInput in{0, shorter, engine::OutputMode::kNone};
    const auto t0 = Clock::now();
    b->run({&in, 1});
    b->read_state(0, state);
    report.add("doc_state.new_length_engine_ms", "ms", ms_since(t0));
  }

  bench::phase("engine: embed");
  // Document -> its last-token embedding (llama.cpp's "embed" anchor).
  for (int r = 0; r < R; ++r) {
    b->reset_state(0);
    const engine::SequenceInput in{0, doc_ids, engine::OutputMode::kLastEmbedding};
    const auto t0 = Clock::now();
    b->run({&in, 1});
    report.add("embed.email_engine_ms", "ms", ms_since(t0));
  }

  bench::phase("engine: field analysis");
  // Field analysis: six forks of the document state, all batched. Each is fed its prompt and
  // generates 8 greedy tokens, then the 8th and a "\n" closing the answer run in embedding mode:
  // the same engine work as the worker does for the client-level figure (a generate with
  // max_tokens 8 on the forked session, whose last token the session's next compute feeds, then a
  // session embed of "\n").
  auto clamp_ids = [&](std::vector<int32_t> ids) {
    for (auto& id : ids) id = std::min<int32_t>(id, static_cast<int32_t>(hp.n_vocab) - 1);
    return ids;
  };
  std::vector<std::vector<int32_t>> fields;
  for (const auto& line : bench::field_prompts(o)) fields.push_back(clamp_ids(tok->encode(line)));
  const std::vector<int32_t> field_end = clamp_ids(tok->encode(sizes.field_end));
  for (int r = 0; r < R; ++r) {
    const auto t0 = Clock::now();
    std::vector<engine::SequenceInput> batch;
    std::vector<uint32_t> slots;
    for (uint32_t i = 0; i < fields.size(); ++i) {
      b->copy_state(0, 1 + i);
      slots.push_back(1 + i);
      batch.push_back({1 + i, fields[i], engine::OutputMode::kLastArgmax});
    }
    const auto res = b->run(batch);
    std::vector<int32_t> next;
    for (const auto& t : res) next.push_back(static_cast<int32_t>(t.data[0]));
    auto gen = greedy(*b, slots, next, sizes.field_tokens - 1);
    // The 8th token goes into the state with the closing "\n", in one forward, as the worker
    // runs a session generate's last token with the session's next compute.
    std::vector<std::vector<int32_t>> closing(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      closing[i] = {next[i]};
      closing[i].insert(closing[i].end(), field_end.begin(), field_end.end());
      batch[i].tokens = closing[i];
      batch[i].output = engine::OutputMode::kLastEmbedding;
    }
    b->run(batch);
    report.add("field_analysis.engine_ms", "ms", ms_since(t0));
    for (size_t i = 0; i < gen.size(); ++i) gen[i].push_back(next[i]);
    report.set_context("field_tokens", gen);  // the client part checks the worker's against them
  }

  bench::phase("engine: embedding throughput");
  // Embedding throughput at the engine: documents one per run vs coalesced 32 per run.
  std::vector<std::vector<int32_t>> docs;
  for (size_t d = 0; d < n_docs; ++d) docs.push_back(pseudo_tokens(doc_len, hp.n_vocab, 99 + d));
  for (size_t group : {size_t{1}, coalesce}) {
    for (int r = 0; r < R; ++r) {
      const auto t0 = Clock::now();
      for (size_t d = 0; d < n_docs; d += group) {
        std::vector<engine::SequenceInput> batch;
        for (size_t i = d; i < std::min(n_docs, d + group); ++i) {
          const uint32_t slot = static_cast<uint32_t>(i - d);
          b->reset_state(slot);
          batch.push_back({slot, docs[i], engine::OutputMode::kLastEmbedding});
        }
        b->run(batch);
      }
      report.add(group == 1 ? "embed.engine_single.docs_s" : "embed.engine_coalesced.docs_s",
                 "docs/s", n_docs / (ms_since(t0) / 1000));
    }
  }

  bench::phase("engine: quality hash");
  // Quality hash: FNV-1a over 64 greedy tokens after the document; catches silent numeric
  // changes between runs and commits.
  b->reset_state(0);
  const engine::SequenceInput in{0, doc_ids, engine::OutputMode::kLastLogits};
  const auto res = b->run({&in, 1});
  std::vector<int32_t> next{engine::argmax(res[0].data)};
  const auto gen = greedy(*b, {0}, next, 64)[0];
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : gen) {
    for (int k = 0; k < 4; ++k)
      h = (h ^ ((static_cast<uint32_t>(t) >> (8 * k)) & 0xff)) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  report.set_context("quality_hash", hex);
  report.set_context("quality_tokens", gen);
}

}  // namespace rwkvd::tools
