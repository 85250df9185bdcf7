#pragma once
// The device buffers of a model's weights, laid out as WeightLayout says (weight_layout.h): one
// or more weight buffers, each matrix bound as its own descriptor range, and the "vecs" buffer
// of 1-D parameters that every kernel binds whole.
#include <cstdint>
#include <vector>

#include "engine/model.h"
#include "engine/vk/buffer.h"
#include "engine/vk/weight_layout.h"

namespace rwkvd::engine::vk {

class WeightStore {
 public:
  WeightStore(Device& dev, const Rwkv7Model& model);
  WeightStore(Device& dev, WeightLayout layout);  // one already made for this device

  const WeightLayout& layout() const { return layout_; }
  const std::vector<PlacedTensor>& order() const { return layout_.order(); }  // forward order
  uint32_t n_segments() const { return layout_.n_segments(); }
  Buffer& buffer(uint32_t i) { return buffers_[i]; }
  Buffer& vecs() { return vecs_; }
  uint64_t device_bytes() const { return device_bytes_; }

  // The descriptor range of a matrix; its float offset in vecs for a 1-D parameter.
  BufferRange range(const GgufTensor* t) const;
  uint32_t vec(const GgufTensor* t) const { return layout_.vec(t); }

 private:
  WeightLayout layout_;
  std::vector<Buffer> buffers_;
  Buffer vecs_;
  uint64_t device_bytes_ = 0;
};

}  // namespace rwkvd::engine::vk
