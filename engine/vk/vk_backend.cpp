// The Vulkan Backend: splits a batch into chunks (up to max_chunk tokens per sequence, at most
// token_cap tokens in all), writes the chunk's metadata, replays the command buffers recorded
// for its shape, and copies the requested rows out. State slots live in one device buffer.
#include "engine/vk/vk_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

#include "engine/cpu/thread_pool.h"
#include "engine/error.h"
#include "engine/sampler.h"
#include "engine/vk/commands.h"
#include "engine/vk/context.h"
#include "engine/vk/device.h"
#include "engine/vk/forward.h"
#include "engine/vk/pipelines.h"
#include "engine/vk/uploader.h"
#include "engine/vk/vk_check.h"
#include "engine/vk/weight_layout.h"
#include "engine/vk/weights.h"

namespace rwkvd::engine {
namespace {

using Clock = std::chrono::steady_clock;
using namespace vk;

// Outputs of a forward from which the copiers' threads copy them out of the readback buffer.
constexpr size_t kThreadedCopyBytes = size_t{8} << 20;
// State slots where the options ask for as many as fit (0): a step of 256 sequences.
constexpr uint32_t kMostDefaultSlots = 256;

bool wants_logits(OutputMode m) {
  return m == OutputMode::kLastLogits || m == OutputMode::kAllLogits;
}
bool wants_all(OutputMode m) {
  return m == OutputMode::kAllLogits || m == OutputMode::kAllEmbeddings;
}

class VkBackendImpl final : public VkBackend {
 public:
  VkBackendImpl(std::shared_ptr<const Rwkv7Model> model, const BackendOptions& opt,
                std::shared_ptr<VkContext> context)
      : model_(std::move(model)), opt_(opt), hp_(model_->hparams()), open_(Clock::now()) {
    if (opt_.max_chunk == 0) throw EngineError("vulkan: max_chunk must be positive");
    if (context == nullptr) {  // a device of its own: its making is part of this load
      context_ = std::make_shared<VkContext>();
      device_s_ = context_->device_seconds();
      pipeline_cache_s_ = context_->pipeline_cache_seconds();
    } else {
      context_ = std::move(context);
    }
    dev_ = &context_->device();
    pipes_ = &context_->pipelines();
    vk::WeightLayout layout(*model_, dev_->props().limits.maxStorageBufferRange);
    resolve_slots(layout);
    // The pipelines depend only on the device and the model's types, the forward's buffers on
    // its shape: both are made on other threads while the weights' memory is set up and the
    // upload starts, instead of after.
    auto pipelines = std::async(std::launch::async, [this] {
      const double start_s = seconds_since_open();
      Forward::prepare_pipelines(*dev_, *pipes_, *model_);
      return seconds_since_open() - start_s;
    });
    auto buffers = std::async(std::launch::async, [this] {
      // One state slot at first: they grow with the slots in use (Forward::ensure_slots).
      return ForwardBuffers::make(*dev_, hp_, token_cap(opt_.n_slots), opt_.n_slots, 1);
    });
    const double weights_start_s = seconds_since_open();
    weights_ = std::make_unique<WeightStore>(*dev_, std::move(layout));
    upload_start_s_ = seconds_since_open();
    uploader_ = std::make_unique<Uploader>(*dev_, *weights_, dev_->tuning().staging_bytes);
    weights_setup_s_ = seconds_since_open() - weights_start_s;
    pipelines_s_ = pipelines.get();
    const size_t early_pipelines = pipes_->count();
    const double forward_start_s = seconds_since_open();
    ForwardBuffers made = buffers.get();
    forward_buffers_s_ = made.seconds;
    readback_s_ = made.readback_seconds;
    forward_ = std::make_unique<Forward>(*dev_, *pipes_, *weights_, *model_, std::move(made));
    forward_setup_s_ = seconds_since_open() - forward_start_s;
    late_pipelines_ = static_cast<uint32_t>(pipes_->count() - early_pipelines);
    cmds_ = std::make_unique<Commands>(*dev_);
    // The state transfer buffers (2 x 21.6 MB of host memory for 2.9B, ~12 ms in the driver) are
    // made after the backend is usable, on another thread; a transfer waits for them.
    xfer_made_ = std::async(std::launch::async, [this] {
      xfer_up_ = Buffer(*dev_, slot_bytes(), MemKind::kUpload);
      xfer_down_ = Buffer(*dev_, slot_bytes(), MemKind::kReadback);
    });
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    RWKVD_VK(vkCreateFence(dev_->device(), &fci, nullptr, &fence_));
    usable_s_ = seconds_since_open();
  }

  ~VkBackendImpl() override {
    if (xfer_made_.valid()) xfer_made_.wait();
    uploader_.reset();  // stops the thread before anything it uses goes away
    if (dev_) {
      vkDeviceWaitIdle(dev_->device());
      vkDestroyFence(dev_->device(), fence_, nullptr);
    }
  }

  const Rwkv7Hparams& hparams() const override { return hp_; }
  std::string device_name() const override { return "vulkan:" + dev_->name(); }
  std::vector<std::string> device_features() const override {
    std::vector<std::string> f = forward_->kernel_choices();
    if (dev_->dedicated_transfer()) f.push_back("transfer_queue");
    return f;
  }
  uint32_t n_slots() const override { return opt_.n_slots; }

  LoadStats load_stats() const override {
    LoadStats s;
    s.usable_ms = 1e3 * usable_s_;
    s.device_ms = 1e3 * device_s_;
    s.pipeline_cache_ms = 1e3 * pipeline_cache_s_;
    s.weights_setup_ms = 1e3 * weights_setup_s_;
    s.forward_setup_ms = 1e3 * forward_setup_s_;
    s.pipelines_ms = 1e3 * pipelines_s_;
    s.late_pipelines = late_pipelines_;
    s.forward_buffers_ms = 1e3 * forward_buffers_s_;
    s.readback_ms = 1e3 * readback_s_;
    const double r = uploader_->resident_seconds();
    s.resident_ms = r < 0 ? -1 : 1e3 * (upload_start_s_ + r);
    s.weight_bytes = weights_->device_bytes();
    s.state_bytes = forward_->state().size();
    s.scratch_bytes = forward_->scratch_bytes() + 2 * slot_bytes();  // + the transfer buffers
    return s;
  }
  void wait_resident() override { uploader_->wait_all(); }
  uint32_t dispatches_per_layer() const override { return forward_->dispatches_per_layer(); }
  uint32_t token_capacity() const override { return forward_->token_cap(); }
  size_t pipelines_made() const override { return pipes_->count(); }

  std::vector<Tensor> run(std::span<const SequenceInput> batch) override {
    validate_batch(hp_, n_slots(), batch);
    uint32_t slots = 0;
    for (const SequenceInput& in : batch) slots = std::max(slots, in.slot + 1);
    forward_->ensure_slots(slots, opt_.n_slots);
    std::vector<Tensor> out(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
      const int64_t width = wants_logits(batch[i].output) ? hp_.n_vocab : hp_.n_embd;
      if (batch[i].output == OutputMode::kNone) continue;
      out[i].shape = {wants_all(batch[i].output) ? n : 1, width};
      if (batch[i].output == OutputMode::kLastArgmax) out[i].shape = {1};
      // A single row is assigned from the readback buffer when it comes (run_chunk), not
      // zero-filled first: 256 KB of logits a sequence, every decode step.
      if (wants_all(batch[i].output)) out[i].data.resize(static_cast<size_t>(out[i].numel()));
    }
    std::vector<size_t> done(batch.size(), 0);
    while (run_chunk(batch, done, out)) {
    }
    return out;
  }

  void reset_state(uint32_t slot) override {
    check_slot(slot);
    if (slot >= forward_->slot_capacity()) return;  // a slot not yet on the device: zero already
    cmds_->run_now([&](VkCommandBuffer cb) {
      Kernels::barrier(cb);
      vkCmdFillBuffer(cb, forward_->state().handle(), slot_offset(slot), slot_bytes(), 0);
    });
  }

  void read_state(uint32_t slot, std::span<float> dst) override {
    check_slot(slot);
    check_size(dst.size());
    if (slot >= forward_->slot_capacity()) {  // a slot not yet on the device: the zero state
      std::fill(dst.begin(), dst.end(), 0.0f);
      return;
    }
    wait_transfer_buffers();
    cmds_->run_now([&](VkCommandBuffer cb) {
      Kernels::barrier(cb);
      VkBufferCopy r{slot_offset(slot), 0, slot_bytes()};
      vkCmdCopyBuffer(cb, forward_->state().handle(), xfer_down_.handle(), 1, &r);
      host_barrier(cb);
    });
    xfer_down_.invalidate(0, slot_bytes());
    copy_in_parts(dst.data(), xfer_down_.mapped(), slot_bytes());
  }

  void write_state(uint32_t slot, std::span<const float> src) override {
    check_slot(slot);
    check_size(src.size());
    forward_->ensure_slots(slot + 1, opt_.n_slots);
    wait_transfer_buffers();
    copy_in_parts(xfer_up_.mapped(), src.data(), slot_bytes());
    xfer_up_.flush(0, slot_bytes());
    cmds_->run_now([&](VkCommandBuffer cb) {
      Kernels::barrier(cb);
      VkBufferCopy r{0, slot_offset(slot), slot_bytes()};
      vkCmdCopyBuffer(cb, xfer_up_.handle(), forward_->state().handle(), 1, &r);
    });
  }

  void copy_state(uint32_t src, uint32_t dst) override {
    check_slot(src);
    check_slot(dst);
    if (src == dst) return;
    forward_->ensure_slots(std::max(src, dst) + 1, opt_.n_slots);
    cmds_->run_now([&](VkCommandBuffer cb) {
      Kernels::barrier(cb);
      VkBufferCopy r{slot_offset(src), slot_offset(dst), slot_bytes()};
      vkCmdCopyBuffer(cb, forward_->state().handle(), forward_->state().handle(), 1, &r);
    });
  }

 private:
  struct Part {
    size_t seq;      // index in the batch
    uint32_t first;  // first token index in the chunk
    uint32_t n;
  };
  struct OutRow {
    uint32_t token;  // index in the chunk
    size_t seq;
    int64_t dest_row;
  };
  // What one forward runs of a batch: each sequence's tokens in it and the rows it copies out.
  struct Chunk {
    std::vector<Part> parts;
    uint32_t tokens = 0;  // all parts together
    std::vector<OutRow> rows;
    uint32_t head_rows = 0;    // rows[0, head_rows) go through the head
    bool argmax_only = false;  // every head row wants its argmax: they leave as argmax parts
    ForwardShape shape() const {
      uint32_t longest = 0;
      for (const Part& p : parts) longest = std::max(longest, p.n);
      return {tokens,
              static_cast<uint32_t>(parts.size()),
              static_cast<uint32_t>(rows.size()),
              head_rows,
              argmax_only,
              longest};
    }
  };
  // When a chunk's forward reached each step on the host, for the profiler.
  struct ChunkTimes {
    Clock::time_point start, commands, recorded, submitted, done;
    bool recorded_shape = false;  // this forward recorded its shape's command buffers
  };
  // Where a forward's outputs lie in the mapped readback buffer.
  struct ReadbackRows {
    const float* embd;
    const float* logits;
    const uint32_t* argmax_pairs;  // over the logits: each head row's argmax parts
    uint32_t argmax_parts;
  };

  // Runs the next chunk of the batch; false when nothing was left.
  bool run_chunk(std::span<const SequenceInput> batch, std::vector<size_t>& done,
                 std::vector<Tensor>& out) {
    ChunkTimes times;
    times.start = Clock::now();
    Chunk chunk = take_parts(batch, done);
    if (chunk.parts.empty()) return false;
    add_output_rows(batch, done, chunk);
    write_meta(batch, done, chunk);
    const ForwardShape shape = chunk.shape();
    const bool resident = uploader_->all_resident();
    run_forward(shape, resident, times);
    forward_->collect_profile(shape, resident);
    if (!chunk.rows.empty()) copy_outputs(batch, chunk, out);
    for (const Part& p : chunk.parts) done[p.seq] += p.n;
    record_host_times(chunk.tokens, times);
    return true;
  }

  // The chunk's parts, in batch order: each unfinished sequence takes up to max_chunk tokens while
  // the chunk has tokens and sequences left. Output rows the readback buffer still holds limit
  // them too: a sequence that wants every token's output takes at most that many tokens; one that
  // wants its last needs a row where it ends.
  Chunk take_parts(std::span<const SequenceInput> batch, const std::vector<size_t>& done) const {
    const uint32_t cap = forward_->token_cap();
    Chunk chunk;
    uint32_t& T = chunk.tokens;
    uint32_t rows_left = forward_->out_cap();
    for (size_t i = 0; i < batch.size() && T < cap && chunk.parts.size() < forward_->seq_cap();
         ++i) {
      const size_t rem = batch[i].tokens.size() - done[i];
      if (rem == 0) continue;
      uint32_t n = static_cast<uint32_t>(std::min<size_t>({rem, opt_.max_chunk, cap - T}));
      const OutputMode m = batch[i].output;
      if (wants_all(m)) {
        n = std::min(n, rows_left);
      } else if (m != OutputMode::kNone && n == rem && rows_left == 0) {
        n = 0;
      }
      if (n == 0) break;  // the next chunk takes it
      if (m != OutputMode::kNone) rows_left -= wants_all(m) ? n : (n == rem ? 1 : 0);
      chunk.parts.push_back({i, T, n});
      T += n;
    }
    return chunk;
  }

  // Output rows: every logits row first (the head runs on a prefix), then embedding rows. Only
  // where every head row wants its argmax do the rows stay on the device; otherwise the argmax
  // rows are picked on the host from the rows copied anyway (the same pick).
  static void add_output_rows(std::span<const SequenceInput> batch, const std::vector<size_t>& done,
                              Chunk& chunk) {
    for (int pass = 0; pass < 2; ++pass) {
      for (const Part& p : chunk.parts) {
        const OutputMode m = batch[p.seq].output;
        if (m == OutputMode::kNone || goes_through_head(m) != (pass == 0)) continue;
        if (wants_all(m)) {
          for (uint32_t j = 0; j < p.n; ++j) {
            chunk.rows.push_back({p.first + j, p.seq, static_cast<int64_t>(done[p.seq] + j)});
          }
        } else if (done[p.seq] + p.n == batch[p.seq].tokens.size()) {
          chunk.rows.push_back({p.first + p.n - 1, p.seq, 0});
        }
      }
    }
    uint32_t n_argmax = 0;
    for (const OutRow& r : chunk.rows) {
      chunk.head_rows += goes_through_head(batch[r.seq].output) ? 1 : 0;
      n_argmax += batch[r.seq].output == OutputMode::kLastArgmax ? 1 : 0;
    }
    chunk.argmax_only = chunk.head_rows > 0 && n_argmax == chunk.head_rows;
  }

  // The forward's metadata: per token {id, part, index in the part, 0}, per part {slot, first
  // token, tokens, 0}, then each output row's token index in the chunk.
  void write_meta(std::span<const SequenceInput> batch, const std::vector<size_t>& done,
                  const Chunk& chunk) {
    auto* meta = static_cast<uint32_t*>(forward_->meta().mapped());
    for (uint32_t pi = 0; pi < chunk.parts.size(); ++pi) {
      const Part& p = chunk.parts[pi];
      const SequenceInput& s = batch[p.seq];
      for (uint32_t j = 0; j < p.n; ++j) {
        uint32_t* m = meta + 4 * (p.first + j);
        m[0] = static_cast<uint32_t>(s.tokens[done[p.seq] + j]);
        m[1] = pi;
        m[2] = j;
        m[3] = 0;
      }
      uint32_t* m = meta + forward_->meta_seq() + 4 * pi;
      m[0] = s.slot;
      m[1] = p.first;
      m[2] = p.n;
      m[3] = 0;
    }
    for (size_t i = 0; i < chunk.rows.size(); ++i) {
      meta[forward_->meta_out() + i] = chunk.rows[i].token;
    }
    forward_->meta().flush(0, forward_->meta().size());
  }

  // Gets the shape's command buffers (recorded on its first use), submits them and waits for the
  // GPU to finish them.
  void run_forward(const ForwardShape& shape, bool resident, ChunkTimes& times) {
    const size_t recorded_before = forward_->shapes_recorded();
    times.commands = Clock::now();
    const std::vector<VkCommandBuffer>& cbs = forward_->commands(shape, resident);
    times.recorded = Clock::now();
    times.recorded_shape = forward_->shapes_recorded() != recorded_before;
    RWKVD_VK(vkResetFences(dev_->device(), 1, &fence_));
    submit_forward(cbs, resident);
    times.submitted = Clock::now();
    wait_fence(*dev_, fence_);
    times.done = Clock::now();
  }

  // With a transfer queue of its own, each submission also waits on the GPU for the upload of the
  // weights it reads (a no-op once they are resident): that is what makes the other queue's
  // writes visible here. On one queue the upload's barrier does it (uploader.cpp). The last
  // submission signals fence_.
  void submit_forward(const std::vector<VkCommandBuffer>& cbs, bool resident) {
    const bool gpu_wait = dev_->dedicated_transfer();
    auto upload_sync = [&](uint64_t segments) {
      return gpu_wait ? SubmitSync{uploader_->timeline(), segments} : SubmitSync{};
    };
    if (resident) {
      submit(*dev_, cbs, fence_, upload_sync(hp_.n_layer + 2));
    } else {
      // Still loading: each segment goes as soon as its weights are resident.
      for (uint32_t s = 0; s < cbs.size(); ++s) {
        uploader_->wait_segment(s);
        submit(*dev_, {&cbs[s], 1}, s + 1 == cbs.size() ? fence_ : VK_NULL_HANDLE,
               upload_sync(uint64_t{s} + 1));
      }
    }
  }

  // Copies the chunk's output rows from the readback buffer into their sequences' tensors.
  void copy_outputs(std::span<const SequenceInput> batch, const Chunk& chunk,
                    std::vector<Tensor>& out) {
    Buffer& rb = forward_->readback();
    rb.invalidate(0, rb.size());
    const auto* base = static_cast<const std::byte*>(rb.mapped());
    const ReadbackRows from{
        reinterpret_cast<const float*>(base),
        reinterpret_cast<const float*>(base + forward_->readback_logits_offset()),
        reinterpret_cast<const uint32_t*>(base + forward_->readback_logits_offset()),
        Kernels::argmax_parts(hp_.n_vocab)};
    const auto copy_rows = [&](size_t r0, size_t r1, unsigned) {
      for (size_t i = r0; i < r1; ++i) copy_output_row(from, batch, chunk, i, out);
    };
    // Many rows go to the copiers' threads: a step of 32 sequences copies 8 MB of logits while
    // the GPU waits for the next (2.9B Q4_K_M on an H100: gen-32 about 2100 -> 2400 tok/s).
    // Fewer stay on this thread, where waking the copiers costs more than it saves (gen-8, 2 MB a
    // step: about 1520 tok/s here, 1425 on the copiers).
    if (host_output_bytes(batch, chunk) >= kThreadedCopyBytes) {
      copiers_.parallel_for(chunk.rows.size(), copy_rows);
    } else {
      copy_rows(0, chunk.rows.size(), 0);
    }
  }

  // Bytes of the logits and embedding rows the host copies; none where the rows leave as argmax
  // parts.
  size_t host_output_bytes(std::span<const SequenceInput> batch, const Chunk& chunk) const {
    size_t bytes = 0;
    if (!chunk.argmax_only) {
      for (const OutRow& r : chunk.rows) {
        bytes +=
            (goes_through_head(batch[r.seq].output) ? hp_.n_vocab : hp_.n_embd) * sizeof(float);
      }
    }
    return bytes;
  }

  // Output row i into its sequence's tensor: its argmax, its logits or its embedding, as the
  // sequence's output mode asks.
  void copy_output_row(const ReadbackRows& from, std::span<const SequenceInput> batch,
                       const Chunk& chunk, size_t i, std::vector<Tensor>& out) const {
    const OutRow& row = chunk.rows[i];
    Tensor& t = out[row.seq];
    const OutputMode mode = batch[row.seq].output;
    if (mode == OutputMode::kLastArgmax) {
      float best = 0;
      const int32_t id = pick_argmax(from, i, chunk.argmax_only, &best);
      t.data.assign(1, argmax_output(id, best));
      return;
    }
    const bool lg = wants_logits(mode);
    const size_t width = lg ? hp_.n_vocab : hp_.n_embd;
    const float* src = lg ? from.logits + i * width : from.embd + i * width;
    if (wants_all(mode)) {
      std::memcpy(t.data.data() + row.dest_row * static_cast<int64_t>(width), src,
                  width * sizeof(float));
    } else {
      t.data.assign(src, src + width);
    }
  }

  // Output row i's greedy pick and its logit: from the row's argmax parts where only those came
  // back, else from its logits.
  int32_t pick_argmax(const ReadbackRows& from, size_t i, bool argmax_only, float* best) const {
    if (argmax_only) {
      return Kernels::argmax_of_parts(from.argmax_pairs + 2 * from.argmax_parts * i,
                                      from.argmax_parts, best);
    }
    const int32_t id = engine::argmax({from.logits + i * hp_.n_vocab, hp_.n_vocab});
    *best = from.logits[i * hp_.n_vocab + static_cast<size_t>(id)];
    return id;
  }

  // The host's share of the chunk's time, where the profiler records it. A shape's first forward
  // records its command buffers: that is reported apart from the rest.
  void record_host_times(uint32_t tokens, const ChunkTimes& times) {
    Profiler& prof = forward_->profiler();
    if (!prof.records_host()) return;
    const auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
    const double record_us = times.recorded_shape ? us(times.recorded - times.commands) : 0.0;
    if (times.recorded_shape) {
      prof.host(tokens, "record the shape's commands (first use)", record_us);
    }
    prof.host(tokens, "prepare + submit", us(times.submitted - times.start) - record_us);
    prof.host(tokens, "wait for the GPU", us(times.done - times.submitted));
    prof.host(tokens, "copy outputs", us(Clock::now() - times.done));
  }

  static void host_barrier(VkCommandBuffer cb) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                         0, nullptr, 0, nullptr);
  }
  // A state (21.6 MB for 2.9B) into or out of the transfer buffers, on a few threads: one copies
  // ~6 GB/s into write-combined memory, and the engine thread waits for every such copy (a
  // session coming back from the host, a state in a request or a reply).
  void copy_in_parts(void* dst, const void* src, size_t bytes) {
    constexpr size_t kBlock = size_t{1} << 20;
    copiers_.parallel_for((bytes + kBlock - 1) / kBlock, [&](size_t b0, size_t b1, unsigned) {
      const size_t begin = b0 * kBlock, end = std::min(bytes, b1 * kBlock);
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  end - begin);
    });
  }
  void wait_transfer_buffers() {
    if (xfer_made_.valid()) xfer_made_.get();  // rethrows an allocation's failure
  }
  void check_slot(uint32_t slot) const {
    if (slot >= opt_.n_slots) {
      throw EngineError("state slot " + std::to_string(slot) + " is out of range (" +
                        std::to_string(opt_.n_slots) + " slots)");
    }
  }
  // The state slots: the options' count, or (0) as many as fit, at most kMostDefaultSlots. The
  // slots take device memory only as they are first used, but every one must fit beside the
  // weights and the forward's buffers in 90% of the device's largest heap (the rest for the
  // driver and other programs): a count that cannot is refused at load, not hours later when a
  // slot is first needed.
  void resolve_slots(const vk::WeightLayout& weights) {
    VkDeviceSize heap = 0;
    const VkPhysicalDeviceMemoryProperties& m = dev_->mem_props();
    for (uint32_t i = 0; i < m.memoryHeapCount; ++i) heap = std::max(heap, m.memoryHeaps[i].size);
    if (VkDeviceSize{opt_.n_slots} * slot_bytes() > heap) {  // (before sizing buffers for them)
      throw EngineError(std::to_string(opt_.n_slots) + " state slots of " +
                        std::to_string(slot_bytes()) + " bytes exceed the device's memory (" +
                        std::to_string(heap >> 20) + " MiB); ask for fewer");
    }
    const uint64_t range = dev_->props().limits.maxStorageBufferRange;
    uint64_t beside = weights.vecs_bytes();
    for (const VkDeviceSize b : weights.buffer_bytes()) beside += b;
    const uint32_t seqs = opt_.n_slots != 0 ? opt_.n_slots : kMostDefaultSlots;
    const auto g = vk::ForwardGeometry::fit(hp_, token_cap(seqs), seqs, range, /*say=*/false);
    beside += uint64_t{g.act.total} * 4 + g.meta_bytes();
    const uint64_t room = heap / 10 * 9 > beside ? heap / 10 * 9 - beside : 0;
    const uint64_t fit = room / slot_bytes();
    const std::string sizes = "the device's memory (" + std::to_string(heap >> 20) +
                              " MiB) leaves " + std::to_string(room >> 20) +
                              " MiB beside the weights and buffers for states of " +
                              std::to_string(slot_bytes() >> 20) + " MiB";
    if (fit == 0) throw EngineError("vulkan: no room for a state slot: " + sizes);
    if (opt_.n_slots == 0) {
      opt_.n_slots = static_cast<uint32_t>(std::min<uint64_t>(fit, kMostDefaultSlots));
    } else if (opt_.n_slots > fit) {
      throw EngineError(std::to_string(opt_.n_slots) + " state slots do not fit: " + sizes +
                        "; ask for at most " + std::to_string(fit));
    }
  }
  uint32_t token_cap(uint32_t seqs) const { return std::max(opt_.max_chunk, std::min(seqs, 64u)); }
  void check_size(size_t n) const {
    if (n != hp_.state_floats()) {
      throw EngineError("state buffer has " + std::to_string(n) + " floats, expected " +
                        std::to_string(hp_.state_floats()));
    }
  }
  VkDeviceSize slot_bytes() const { return hp_.state_floats() * 4; }
  VkDeviceSize slot_offset(uint32_t slot) const { return slot * slot_bytes(); }
  double seconds_since_open() const {
    return std::chrono::duration<double>(Clock::now() - open_).count();
  }

  std::shared_ptr<const Rwkv7Model> model_;
  BackendOptions opt_;
  Rwkv7Hparams hp_;
  Clock::time_point open_;
  double usable_s_ = 0, upload_start_s_ = 0, device_s_ = 0, forward_setup_s_ = 0;
  double pipeline_cache_s_ = 0, weights_setup_s_ = 0, pipelines_s_ = 0, forward_buffers_s_ = 0,
         readback_s_ = 0;
  uint32_t late_pipelines_ = 0;
  // Declaration order is destruction order reversed: the device outlives everything on it.
  std::shared_ptr<VkContext> context_;
  Device* dev_ = nullptr;       // context_'s
  Pipelines* pipes_ = nullptr;  // context_'s
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<Uploader> uploader_;
  std::unique_ptr<Forward> forward_;
  std::unique_ptr<Commands> cmds_;
  Buffer xfer_up_, xfer_down_;
  std::future<void> xfer_made_;  // makes the two above (wait_transfer_buffers)
  cpu::ThreadPool copiers_{4};   // copy_in_parts(), a forward's output rows
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace

std::shared_ptr<VkContext> make_vk_context(const std::function<void(vk::Tuning&)>& tuning) {
  return std::make_shared<VkContext>(tuning);
}

std::unique_ptr<VkBackend> make_vk_backend(std::shared_ptr<const Rwkv7Model> model,
                                           const BackendOptions& options,
                                           std::shared_ptr<VkContext> context) {
  return std::make_unique<VkBackendImpl>(std::move(model), options, std::move(context));
}

}  // namespace rwkvd::engine
