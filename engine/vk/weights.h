#pragma once
// Where every model tensor lives on the device. Matrices keep their GGUF block encoding (Q6_K's
// blocks regrouped row by row for aligned loads: device_layout.h) and are placed (256-byte aligned,
// padded so shaders may over-read a word) in one or more large weight buffers, each bound per
// tensor as its own descriptor range. 1-D parameters (norms, lerps, w0/a0/v0, k_k, k_a, r_k, ln_x)
// are converted to float32 into one "vecs" buffer that every kernel binds whole and indexes by
// offset. Tensors are grouped into upload segments in forward order: 0 = embedding, 1 + l = layer
// l, n_layer + 1 = head.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/model.h"
#include "engine/vk/buffer.h"

namespace rwkvd::engine::vk {

struct PlacedTensor {
  const GgufTensor* tensor = nullptr;
  uint32_t segment = 0;
  bool is_vec = false;
  uint32_t buffer = 0;         // index into WeightStore::buffers() (matrices)
  VkDeviceSize offset = 0;     // bytes (matrices: in their buffer; vecs: in the vecs buffer)
  VkDeviceSize dev_bytes = 0;  // bytes written on the device
};

class WeightStore {
 public:
  WeightStore(Device& dev, const Rwkv7Model& model);

  const std::vector<PlacedTensor>& order() const { return order_; }  // forward order
  uint32_t n_segments() const { return n_segments_; }
  Buffer& buffer(uint32_t i) { return buffers_[i]; }
  Buffer& vecs() { return vecs_; }
  uint64_t device_bytes() const { return device_bytes_; }

  // The descriptor range of a matrix; its float offset in vecs for a 1-D parameter.
  BufferRange range(const GgufTensor* t) const;
  uint32_t vec(const GgufTensor* t) const;

 private:
  const PlacedTensor& find(const GgufTensor* t) const;
  std::vector<PlacedTensor> order_;
  std::unordered_map<const GgufTensor*, size_t> index_;
  std::vector<Buffer> buffers_;
  Buffer vecs_;
  uint32_t n_segments_ = 0;
  uint64_t device_bytes_ = 0;
};

}  // namespace rwkvd::engine::vk
