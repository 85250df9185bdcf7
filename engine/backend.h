#pragma once
// The engine's face to the worker and tools: run a batch of sequences, each with its own state
// slot and its own new tokens, and read/write/copy those slots. Two implementations: cpu (the
// reference) and vk (Vulkan). Neither knows anything of networking.
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/tensor.h"

namespace rwkvd::engine {

enum class OutputMode : uint8_t {
  kNone,           // only advance the state
  kLastLogits,     // [1, n_vocab]
  kAllLogits,      // [n_tokens, n_vocab]
  kLastEmbedding,  // [1, n_embd], final norm applied, head skipped
  kAllEmbeddings,  // [n_tokens, n_embd]
  // [1]: the id of the last token's largest logit (engine::argmax: the lowest id on ties), as
  // a float (exact: vocabularies are far below 2^24). A greedy pick without the logits row
  // leaving the device (256 KB for a 65536-token vocabulary, every decode step). -1 where that
  // logit is not finite (argmax_output): no token can be told from such a row.
  kLastArgmax,
};

// kLastArgmax's value for a row whose largest logit is `best` at `id`.
inline float argmax_output(int32_t id, float best) {
  return std::isfinite(best) ? static_cast<float>(id) : -1.0f;
}

// Whether the mode's rows go through the head (logits, or their argmax).
inline bool goes_through_head(OutputMode m) {
  return m == OutputMode::kLastLogits || m == OutputMode::kAllLogits ||
         m == OutputMode::kLastArgmax;
}

struct SequenceInput {
  uint32_t slot = 0;
  std::span<const int32_t> tokens;
  OutputMode output = OutputMode::kLastLogits;
};

struct BackendOptions {
  // State slots; 0: the backend's choice (Vulkan: as many as the device's memory holds beside the
  // model, at most 256, growing on the device with use; cpu: 32).
  uint32_t n_slots = 16;
  uint32_t max_chunk = 256;  // tokens per sequence per internal forward chunk
  uint32_t n_threads = 0;    // cpu: 0 = all cores
};

// How loading went: open -> usable (forward may start), open -> every weight resident, and
// the device memory held (weights, state slots, scratch).
struct LoadStats {
  double usable_ms = 0;
  double resident_ms = 0;
  // Parts of usable_ms on a GPU (0 elsewhere), in order: open -> device ready (instance,
  // driver); the pipeline cache read from disk (both 0 on a device kept from earlier loads); the
  // weights' device memory and the upload's staging and thread; the forward's set-up
  // (descriptors, the pipelines and buffers that were not ready yet). The rest: state transfer
  // buffers, command pool.
  double device_ms = 0;
  double pipeline_cache_ms = 0;
  double weights_setup_ms = 0;
  double forward_setup_ms = 0;
  // The pipelines (from the pipeline cache where warm), made on other threads beside the
  // weights' set-up: usable_ms holds only what of them outlasts it.
  double pipelines_ms = 0;
  // The forward's buffers and their zero fill, made on another thread beside the weights'
  // set-up too; of those, the host-visible readback buffer (a chunk's outputs: 140 MB for 2.9B
  // at 512 tokens).
  double forward_buffers_ms = 0;
  double readback_ms = 0;
  // Pipelines the forward's set-up still had to make (0 where the early ones were all it needs).
  uint32_t late_pipelines = 0;
  uint64_t weight_bytes = 0;
  uint64_t state_bytes = 0;
  uint64_t scratch_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const Rwkv7Hparams& hparams() const = 0;
  virtual std::string device_name() const = 0;
  // What the device runs, for reports: the kernel variants and queues chosen from its features
  // (e.g. "subgroup_size=32", "tensor_cores", "transfer_queue"). Empty on the CPU.
  virtual std::vector<std::string> device_features() const { return {}; }
  virtual uint32_t n_slots() const = 0;
  virtual LoadStats load_stats() const = 0;

  // Runs every sequence of the batch from its slot's state, leaving the new state in the slot.
  // Returns one tensor per input (empty for kNone). Throws EngineError on a bad slot or token
  // (validated before any state changes).
  virtual std::vector<Tensor> run(std::span<const SequenceInput> batch) = 0;

  // State slots, in the layout of docs/STATE_LAYOUT.md (hparams().state_floats() floats).
  virtual void reset_state(uint32_t slot) = 0;
  virtual void read_state(uint32_t slot, std::span<float> out) = 0;
  virtual void write_state(uint32_t slot, std::span<const float> in) = 0;
  virtual void copy_state(uint32_t src, uint32_t dst) = 0;
};

// Refuses a slot count that is zero or whose states would not fit in half of this machine's
// memory, before anything is allocated (an absurd --slots must be an error, not an OOM kill).
void check_slot_count(const Rwkv7Hparams& hp, uint32_t n_slots);

// Checks a batch against the model and slot count; throws EngineError naming the problem.
void validate_batch(const Rwkv7Hparams& hp, uint32_t n_slots, std::span<const SequenceInput> batch);

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Rwkv7Model> model,
                                          BackendOptions options = {});

}  // namespace rwkvd::engine
