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

// The ids within the model's vocabulary: an id past its last becomes the last.
std::vector<int32_t> clamp_to_vocab(std::vector<int32_t> ids, uint32_t n_vocab) {
  for (auto& id : ids) id = std::min<int32_t>(id, static_cast<int32_t>(n_vocab) - 1);
  return ids;
}

// FNV-1a over the tokens' bytes (little-endian), as 16 hex digits.
std::string fnv1a_hex(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) {
    for (int k = 0; k < 4; ++k)
      h = (h ^ ((static_cast<uint32_t>(t) >> (8 * k)) & 0xff)) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The engine figures, one phase a method, in the order run() calls them: the backend the load
// phase opens last serves every later phase.
class EngineBench {
 public:
  EngineBench(const BenchOptions& o, BenchReport& report)
      : o_(o), report_(report), repeats_(std::max(1, o.repeats)), sizes_(o) {}

  void run() {
    load();
    tokenize();
    prefill();
    generate();
    document_state();
    state_transfers();
    documents_of_new_lengths();
    embed_document();
    field_analysis();
    embedding_throughput();
    quality_hash();
  }

 private:
  // Documents per engine run in the coalesced embedding figure.
  static constexpr size_t kCoalescedDocs = 32;
  // The most sequences of a generation step (gen.b256), and the backend's state slots.
  static constexpr uint32_t kMostSequences = 256;

  // Load: a fresh backend per repeat on the process's one GPU device, made first (as llama.cpp's
  // load figure keeps its Vulkan backend's device); the page cache is warm after the first.
  void load() {
    engine::BackendOptions bo;
    bo.n_slots = kMostSequences;
    // As `rwkvd serve` (its --max-chunk): the email's 854 tokens are one forward.
    bo.max_chunk = 1024;
    bo.n_threads = o_.threads;

    bench::phase("engine: load");
    const auto device_t0 = Clock::now();
    gpu_ = open_gpu_context(o_.device);
    if (gpu_ != nullptr) report_.add("load.device_ms", "ms", ms_since(device_t0));
    for (int r = 0; r < repeats_; ++r) {
      b_.reset();
      const auto t0 = Clock::now();
      b_ = open_backend(o_.model, o_.device, bo, gpu_);
      const int32_t tok = 1;
      const engine::SequenceInput first{0, {&tok, 1}, engine::OutputMode::kLastLogits};
      b_->run({&first, 1});
      report_.add("load.first_token_ms", "ms", ms_since(t0));
      report_load_stats(t0);
    }
    hp_ = b_->hparams();
    record_backend_context();
  }

  // The load's stats once the weights are resident. The GPU uploads in the background;
  // resident_ms is negative until the last byte landed.
  void report_load_stats(Clock::time_point t0) {
    engine::LoadStats ls = b_->load_stats();
    while (ls.resident_ms < 0 && ms_since(t0) < 600'000) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ls = b_->load_stats();
    }
    report_.add("load.usable_ms", "ms", ls.usable_ms);
    report_.add("load.resident_ms", "ms", ls.resident_ms);
    if (gpu_ != nullptr) {  // the GPU's parts of usable_ms
      report_.add("load.weights_setup_ms", "ms", ls.weights_setup_ms);
      report_.add("load.forward_setup_ms", "ms", ls.forward_setup_ms);
      report_.add("load.pipelines_ms", "ms", ls.pipelines_ms);
      report_.add("load.forward_buffers_ms", "ms", ls.forward_buffers_ms);
      report_.add("load.readback_ms", "ms", ls.readback_ms);
    }
  }

  void record_backend_context() {
    const engine::LoadStats ls = b_->load_stats();
    report_.set_context("device", b_->device_name());
    report_.set_context("device_features", b_->device_features());
    report_.set_context("page_cache", "warm (not dropped)");
    report_.set_context(
        "memory_bytes",
        {{"weights", ls.weight_bytes}, {"states", ls.state_bytes}, {"scratch", ls.scratch_bytes}});
    report_.set_context("model_shape", {{"n_layer", hp_.n_layer},
                                        {"n_embd", hp_.n_embd},
                                        {"n_vocab", hp_.n_vocab},
                                        {"n_ffn", hp_.n_ffn}});
  }

  // Tokenize the document.
  void tokenize() {
    bench::phase("engine: tokenize");
    model_ = engine::Rwkv7Model::load(o_.model);
    tok_ = engine::WorldTokenizer::from_gguf(model_->file());
    const std::string doc = bench::document(o_);
    for (int r = 0; r < repeats_; ++r) {
      const int n = 200;
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) doc_ids_ = tok_->encode(doc);
      report_.add("tokenize.email_us", "us", ms_since(t0) * 1000.0 / n);
    }
    doc_ids_ = clamp_to_vocab(std::move(doc_ids_), hp_.n_vocab);
    report_.set_context("doc_tokens", doc_ids_.size());
  }

  void prefill() {
    const std::vector<size_t> prefill_sizes =
        o_.quick ? std::vector<size_t>{64, 256} : std::vector<size_t>{512, 4096};
    for (size_t n : prefill_sizes) {
      const auto toks = pseudo_tokens(n, hp_.n_vocab, n);
      bench::phase("engine: prefill " + std::to_string(n));
      for (int r = 0; r < repeats_; ++r) {
        b_->reset_state(0);
        const engine::SequenceInput in{0, toks, engine::OutputMode::kLastLogits};
        const auto t0 = Clock::now();
        b_->run({&in, 1});
        report_.add("prefill." + std::to_string(n) + ".tok_s", "tok/s", n / (ms_since(t0) / 1000));
      }
    }
  }

  // Greedy generation in batches of 1 to 32 sequences, the argmax on the device; then one
  // sequence with its logits row to the host every step.
  void generate() {
    const int gen_steps = o_.quick ? 16 : 128;
    // 4: the most sequences a decode step runs on the int8 products; 8 and more run on tensor
    // cores where the device has them; 64 to 256: many agents or a batch job at once.
    const std::vector<uint32_t> gen_batches{1, 4, 8, 32, 64, 128, kMostSequences};
    for (uint32_t bs : gen_batches) {
      std::vector<uint32_t> slots(bs);
      std::iota(slots.begin(), slots.end(), 0u);
      bench::phase("engine: generate, batch of " + std::to_string(bs));
      for (int r = 0; r < repeats_; ++r) {
        for (uint32_t s : slots) b_->reset_state(s);
        auto next = pseudo_tokens(bs, hp_.n_vocab, 7 + r);
        const auto t0 = Clock::now();
        greedy(*b_, slots, next, gen_steps);
        report_.add("gen.b" + std::to_string(bs) + ".tok_s", "tok/s",
                    static_cast<double>(bs) * gen_steps / (ms_since(t0) / 1000));
      }
    }
    bench::phase("engine: generate, logits to the host");
    for (int r = 0; r < repeats_; ++r) {
      b_->reset_state(0);
      auto next = pseudo_tokens(1, hp_.n_vocab, 7 + r);
      const auto t0 = Clock::now();
      greedy(*b_, {0}, next, gen_steps, true);
      report_.add("gen.b1_logits.tok_s", "tok/s", gen_steps / (ms_since(t0) / 1000));
    }
  }

  // Document -> state in host memory (the engine part of the client's doc-state figure).
  void document_state() {
    bench::phase("engine: document state");
    state_.resize(hp_.state_floats());
    for (int r = 0; r < repeats_; ++r) {
      b_->reset_state(0);
      const engine::SequenceInput in{0, doc_ids_, engine::OutputMode::kNone};
      const auto t0 = Clock::now();
      b_->run({&in, 1});
      b_->read_state(0, state_);
      report_.add("doc_state.engine_ms", "ms", ms_since(t0));
    }
    report_.set_context("state_floats", state_.size());
  }

  // A state slot to and from host memory alone (the session reads and writes of the client's
  // figures: a document's state in a reply, a session opened from a state).
  void state_transfers() {
    bench::phase("engine: state transfers");
    for (int r = 0; r < repeats_; ++r) {
      auto t0 = Clock::now();
      b_->read_state(0, state_);
      report_.add("state.read_ms", "ms", ms_since(t0));
      t0 = Clock::now();
      b_->write_state(1, state_);
      report_.add("state.write_ms", "ms", ms_since(t0));
    }
  }

  // The document state for documents of lengths the engine has not run before (the email less 1,
  // 2, .. tokens): each forward's shape is new, so its commands are recorded first, as for most
  // documents a worker sees.
  void documents_of_new_lengths() {
    bench::phase("engine: documents of new lengths");
    for (int r = 0; r < repeats_ && static_cast<size_t>(r) + 1 < doc_ids_.size(); ++r) {
      b_->reset_state(0);
      const std::span<const int32_t> shorter(doc_ids_.data(),
                                             doc_ids_.size() - 1 - static_cast<size_t>(r));
      const engine::SequenceInput in{0, shorter, engine::OutputMode::kNone};
      const auto t0 = Clock::now();
      b_->run({&in, 1});
      b_->read_state(0, state_);
      report_.add("doc_state.new_length_engine_ms", "ms", ms_since(t0));
    }
  }

  // Document -> its last-token embedding (llama.cpp's "embed" anchor).
  void embed_document() {
    bench::phase("engine: embed");
    for (int r = 0; r < repeats_; ++r) {
      b_->reset_state(0);
      const engine::SequenceInput in{0, doc_ids_, engine::OutputMode::kLastEmbedding};
      const auto t0 = Clock::now();
      b_->run({&in, 1});
      report_.add("embed.email_engine_ms", "ms", ms_since(t0));
    }
  }

  // Field analysis: six forks of the document state, all batched. Each is fed its prompt and
  // generates 8 greedy tokens, then the 8th and a "\n" closing the answer run in embedding mode:
  // the same engine work as the worker does for the client-level figure (a generate with
  // max_tokens 8 on the forked session, whose last token the session's next compute feeds, then
  // a session embed of "\n").
  void field_analysis() {
    bench::phase("engine: field analysis");
    std::vector<std::vector<int32_t>> fields;
    for (const auto& line : bench::field_prompts(o_)) {
      fields.push_back(clamp_to_vocab(tok_->encode(line), hp_.n_vocab));
    }
    const std::vector<int32_t> field_end =
        clamp_to_vocab(tok_->encode(sizes_.field_end), hp_.n_vocab);
    for (int r = 0; r < repeats_; ++r) {
      const auto t0 = Clock::now();
      std::vector<int32_t> last;
      auto gen = answer_fields(fields, field_end, last);
      report_.add("field_analysis.engine_ms", "ms", ms_since(t0));
      for (size_t i = 0; i < gen.size(); ++i) gen[i].push_back(last[i]);
      report_.set_context("field_tokens", gen);  // the client part checks the worker's against them
    }
  }

  // One round of the field analysis in slots 1.. (forks of slot 0): returns each field's tokens
  // but its last, which `last` receives.
  std::vector<std::vector<int32_t>> answer_fields(const std::vector<std::vector<int32_t>>& fields,
                                                  const std::vector<int32_t>& field_end,
                                                  std::vector<int32_t>& last) {
    std::vector<engine::SequenceInput> batch;
    std::vector<uint32_t> slots;
    for (uint32_t i = 0; i < fields.size(); ++i) {
      b_->copy_state(0, 1 + i);
      slots.push_back(1 + i);
      batch.push_back({1 + i, fields[i], engine::OutputMode::kLastArgmax});
    }
    const auto res = b_->run(batch);
    for (const auto& t : res) last.push_back(static_cast<int32_t>(t.data[0]));
    auto gen = greedy(*b_, slots, last, sizes_.field_tokens - 1);
    // The last token goes into the state with the closing "\n", in one forward, as the worker
    // runs a session generate's last token with the session's next compute.
    std::vector<std::vector<int32_t>> closing(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      closing[i] = {last[i]};
      closing[i].insert(closing[i].end(), field_end.begin(), field_end.end());
      batch[i].tokens = closing[i];
      batch[i].output = engine::OutputMode::kLastEmbedding;
    }
    b_->run(batch);
    return gen;
  }

  // Embedding throughput at the engine: documents one per run vs coalesced 32 per run.
  void embedding_throughput() {
    bench::phase("engine: embedding throughput");
    std::vector<std::vector<int32_t>> docs;
    for (size_t d = 0; d < sizes_.n_docs; ++d) {
      docs.push_back(pseudo_tokens(sizes_.doc_len, hp_.n_vocab, 99 + d));
    }
    for (size_t group : {size_t{1}, kCoalescedDocs}) {
      for (int r = 0; r < repeats_; ++r) {
        const auto t0 = Clock::now();
        embed_in_groups(docs, group);
        report_.add(group == 1 ? "embed.engine_single.docs_s" : "embed.engine_coalesced.docs_s",
                    "docs/s", sizes_.n_docs / (ms_since(t0) / 1000));
      }
    }
  }

  // Each document's last-token embedding, `group` documents per run (in slots 0..group-1).
  void embed_in_groups(const std::vector<std::vector<int32_t>>& docs, size_t group) {
    const size_t n_docs = docs.size();
    for (size_t d = 0; d < n_docs; d += group) {
      std::vector<engine::SequenceInput> batch;
      for (size_t i = d; i < std::min(n_docs, d + group); ++i) {
        const uint32_t slot = static_cast<uint32_t>(i - d);
        b_->reset_state(slot);
        batch.push_back({slot, docs[i], engine::OutputMode::kLastEmbedding});
      }
      b_->run(batch);
    }
  }

  // Quality hash: FNV-1a over 64 greedy tokens after the document; catches silent numeric
  // changes between runs and commits.
  void quality_hash() {
    bench::phase("engine: quality hash");
    b_->reset_state(0);
    const engine::SequenceInput in{0, doc_ids_, engine::OutputMode::kLastLogits};
    const auto res = b_->run({&in, 1});
    std::vector<int32_t> next{engine::argmax(res[0].data)};
    const auto gen = greedy(*b_, {0}, next, 64)[0];
    report_.set_context("quality_hash", fnv1a_hex(gen));
    report_.set_context("quality_tokens", gen);
  }

  const BenchOptions& o_;
  BenchReport& report_;
  const int repeats_;
  const bench::Sizes sizes_;
  // Declaration order is destruction order reversed: the GPU device outlives the backend.
  std::shared_ptr<engine::VkContext> gpu_;
  std::unique_ptr<engine::Backend> b_;
  engine::Rwkv7Hparams hp_;
  std::shared_ptr<const engine::Rwkv7Model> model_;  // the tokenizer's
  std::unique_ptr<engine::WorldTokenizer> tok_;
  std::vector<int32_t> doc_ids_;  // the document's tokens, within the vocabulary
  std::vector<float> state_;      // a state slot in host memory
};

}  // namespace

void run_engine_bench(const BenchOptions& o, BenchReport& report) {
  EngineBench(o, report).run();
}

}  // namespace rwkvd::tools
