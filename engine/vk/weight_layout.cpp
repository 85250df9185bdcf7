#include "engine/vk/weight_layout.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "engine/error.h"
#include "engine/vk/buffer.h"
#include "engine/vk/device_layout.h"

namespace rwkvd::engine::vk {
namespace {

constexpr VkDeviceSize kAlign = 256;  // >= every device's minStorageBufferOffsetAlignment
constexpr VkDeviceSize kPad = 16;     // shaders read up to 4 bytes past a tensor's last block
constexpr VkDeviceSize kMaxBuffer = VkDeviceSize{1} << 30;

std::unordered_set<const GgufTensor*> vec_tensors(const Rwkv7Model& model) {
  std::unordered_set<const GgufTensor*> vecs{model.emb_norm_w, model.emb_norm_b, model.out_norm_w,
                                             model.out_norm_b};
  for (const Rwkv7Layer& L : model.layers()) {
    for (const GgufTensor* t :
         {L.attn_norm_w, L.attn_norm_b, L.attn_norm2_w, L.attn_norm2_b, L.lerp_fused, L.w0, L.a0,
          L.v0, L.k_k, L.k_a, L.r_k, L.ln_x_w, L.ln_x_b, L.ffn_lerp_k}) {
      vecs.insert(t);
    }
  }
  return vecs;
}

}  // namespace

VkDeviceSize PlacedTensor::bound_bytes() const {
  return (dev_bytes + kPad + 3) / 4 * 4;
}

WeightLayout::WeightLayout(const Rwkv7Model& model, VkDeviceSize max_range) {
  const std::unordered_set<const GgufTensor*> vecs = vec_tensors(model);
  // Segments follow tensors_in_forward_order(): 3 embedding tensors, then each layer's, then 3.
  const std::vector<const GgufTensor*> fwd = model.tensors_in_forward_order();
  const size_t per_layer = (fwd.size() - 6) / model.layers().size();
  const uint32_t L = static_cast<uint32_t>(model.layers().size());
  n_segments_ = L + 2;

  const VkDeviceSize limit = std::min(kMaxBuffer, max_range);
  std::vector<Placer> placers;
  Placer vec_placer(16);
  for (size_t i = 0; i < fwd.size(); ++i) {
    PlacedTensor p;
    p.tensor = fwd[i];
    p.segment =
        i < 3 ? 0 : (i >= fwd.size() - 3 ? L + 1 : 1 + static_cast<uint32_t>((i - 3) / per_layer));
    p.is_vec = vecs.count(p.tensor) != 0;
    if (p.is_vec) {
      const GgmlType t = p.tensor->type;
      if (t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16) {
        throw EngineError("vulkan: 1-D tensor " + std::string(p.tensor->name) + " has type " +
                          std::string(ggml_traits(t).name) + " (F32/F16/BF16 expected)");
      }
      p.dev_bytes = static_cast<VkDeviceSize>(p.tensor->n_elements()) * 4;
      p.offset = vec_placer.place(p.dev_bytes);
    } else {
      // (Q6_K rows take their device form: device_layout.h.)
      const uint64_t K = static_cast<uint64_t>(p.tensor->ne[0]);
      p.dev_bytes = p.tensor->n_elements() / K * device_row_bytes(p.tensor->type, K);
      const VkDeviceSize need = p.bound_bytes();
      if (need > max_range) {
        throw EngineError("vulkan: tensor " + std::string(p.tensor->name) + " (" +
                          std::to_string(need) +
                          " bytes) exceeds the device's storage buffer range");
      }
      if (placers.empty() || placers.back().size() + need + kAlign > limit)
        placers.emplace_back(kAlign);
      p.buffer = static_cast<uint32_t>(placers.size() - 1);
      p.offset = placers.back().place(need);
    }
    index_[p.tensor] = order_.size();
    order_.push_back(p);
  }
  for (const Placer& pl : placers) buffer_bytes_.push_back(pl.size());
  vecs_bytes_ = vec_placer.size();
}

const PlacedTensor& WeightLayout::find(const GgufTensor* t) const {
  auto it = index_.find(t);
  if (it == index_.end()) throw EngineError("vulkan: tensor not placed");
  return order_[it->second];
}

uint32_t WeightLayout::vec(const GgufTensor* t) const {
  const PlacedTensor& p = find(t);
  if (!p.is_vec) throw EngineError("vulkan: " + std::string(t->name) + " is not a vector");
  return static_cast<uint32_t>(p.offset / 4);
}

}  // namespace rwkvd::engine::vk
