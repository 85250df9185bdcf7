#pragma once
// Recording of each kernel family: the C++ mirror of every shader's push constants and the
// dispatch geometry. Callers own buffers and descriptor sets; the forward (forward.cpp) and the
// kernel tests both record through these.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>

#include "engine/ggml_type.h"
#include "engine/vk/pipelines.h"

namespace rwkvd::engine::vk {

enum class MmMode : uint32_t { kStore = 0, kAdd = 1, kTanh = 2, kSigmoid = 3, kReluSq = 4 };

// One matrix of a grouped product; its weight is array element i of the set's weight binding.
struct MmSlot {
  uint32_t K = 0, N = 0;          // ne[0] (inputs), ne[1] (outputs)
  uint32_t x_off = 0, y_off = 0;  // act float offsets of x [T][K] and y [T][N]
  MmMode mode = MmMode::kStore;
  uint32_t row_bytes = 0;
};

struct ShiftArgs {
  uint32_t D, n_lerp, x_off, out_off, out_stride, save_off, norm_w, norm_b, lerp_off, state_row,
      slot_floats, commit, commit_src, commit_row, meta_seq;
  float eps;
};

struct WkvArgs {
  uint32_t D, r_off, k_off, v_off, wl_off, al_off, vl_off, g_off, vf_off, y_off;
  uint32_t w0, a0, v0, k_k, k_a, r_k, lnx_w, lnx_b;
  uint32_t state_base, slot_floats, layer0, meta_seq;
};

struct EmbedArgs {
  uint32_t D, row_bytes, x_off, norm_w, norm_b;
  float eps;
};

struct OutLnArgs {
  uint32_t D, x_off, embd_off, norm_w, norm_b, n_out, n_seq, meta_seq, meta_out, slot_floats,
      commit_src, commit_row;
  float eps;
};

class Kernels {
 public:
  Kernels(Device& dev, Pipelines& pipes);

  // Creates every pipeline the model's types need now, so that a forward never compiles.
  void warm(std::span<const GgmlType> types, uint32_t head_size);

  // y = W x for 1..4 weights of `type`, T tokens.
  void mm(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, std::span<const MmSlot> slots,
          uint32_t T);
  void embed(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, const EmbedArgs& a,
             uint32_t T);
  void shift(VkCommandBuffer cb, VkDescriptorSet set, const ShiftArgs& a, uint32_t T);
  void wkv(VkCommandBuffer cb, VkDescriptorSet set, const WkvArgs& a, uint32_t n_head,
           uint32_t head_size, uint32_t n_seq);
  void out_ln(VkCommandBuffer cb, VkDescriptorSet set, const OutLnArgs& a);

  // Makes every earlier shader/transfer write visible to every later shader/transfer access.
  static void barrier(VkCommandBuffer cb);

  uint32_t dispatches() const { return dispatches_; }  // recorded so far (for reports/tests)

 private:
  void bind(VkCommandBuffer cb, VkDescriptorSet set, VkPipeline p, const void* pc, uint32_t size);
  Device& dev_;
  Pipelines& pipes_;
  uint32_t wg_ = 64;  // workgroup size of the row kernels and the matmul
  uint32_t dispatches_ = 0;
  uint32_t max_row_groups_ = UINT32_MAX;  // most workgroups along the rows of a product
};

// Shader-name suffix of a weight type ("q4_k").
std::string weight_type_suffix(GgmlType t);

}  // namespace rwkvd::engine::vk
