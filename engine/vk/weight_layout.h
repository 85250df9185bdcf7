#pragma once
// Where every model tensor will live on the device, decided from the model alone (and the
// device's storage buffer range): matrices keep their GGUF block encoding (Q6_K's blocks
// regrouped row by row for aligned loads: device_layout.h), placed 256-byte aligned and padded so
// shaders may over-read a word, in one or more weight buffers of at most 1 GiB; 1-D parameters
// (norms, lerps, w0/a0/v0, k_k, k_a, r_k, ln_x) become float32 in one "vecs" buffer indexed by
// offset. Tensors are grouped into upload segments in forward order: 0 = embedding, 1 + l =
// layer l, n_layer + 1 = head. WeightStore makes the buffers; the forward's plan reads the
// offsets without a device.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/model.h"

namespace rwkvd::engine::vk {

struct PlacedTensor {
  const GgufTensor* tensor = nullptr;
  uint32_t segment = 0;
  bool is_vec = false;
  uint32_t buffer = 0;               // which weight buffer (matrices)
  VkDeviceSize offset = 0;           // bytes (matrices: in their buffer; vecs: in the vecs buffer)
  VkDeviceSize dev_bytes = 0;        // bytes written on the device
  VkDeviceSize bound_bytes() const;  // a matrix's descriptor range: its bytes and the padding
};

class WeightLayout {
 public:
  // max_range: the device's maxStorageBufferRange. Throws EngineError on a 1-D tensor of a type
  // other than F32/F16/BF16 and on a matrix larger than max_range.
  WeightLayout(const Rwkv7Model& model, VkDeviceSize max_range);

  const std::vector<PlacedTensor>& order() const { return order_; }  // forward order
  uint32_t n_segments() const { return n_segments_; }
  const std::vector<VkDeviceSize>& buffer_bytes() const { return buffer_bytes_; }
  VkDeviceSize vecs_bytes() const { return vecs_bytes_; }

  const PlacedTensor& find(const GgufTensor* t) const;
  // A 1-D parameter's float offset in vecs.
  uint32_t vec(const GgufTensor* t) const;

 private:
  std::vector<PlacedTensor> order_;
  std::unordered_map<const GgufTensor*, size_t> index_;
  std::vector<VkDeviceSize> buffer_bytes_;
  VkDeviceSize vecs_bytes_ = 0;
  uint32_t n_segments_ = 0;
};

}  // namespace rwkvd::engine::vk
