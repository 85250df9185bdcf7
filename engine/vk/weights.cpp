#include "engine/vk/weights.h"

#include <string>
#include <utility>

#include "engine/error.h"

namespace rwkvd::engine::vk {

WeightStore::WeightStore(Device& dev, const Rwkv7Model& model)
    : WeightStore(dev, WeightLayout(model, dev.props().limits.maxStorageBufferRange)) {}

WeightStore::WeightStore(Device& dev, WeightLayout layout) : layout_(std::move(layout)) {
  for (const VkDeviceSize bytes : layout_.buffer_bytes()) {
    buffers_.emplace_back(dev, bytes, MemKind::kDevice, /*upload_target=*/true);
    device_bytes_ += bytes;
  }
  vecs_ = Buffer(dev, layout_.vecs_bytes(), MemKind::kDevice, /*upload_target=*/true);
  device_bytes_ += layout_.vecs_bytes();
}

BufferRange WeightStore::range(const GgufTensor* t) const {
  const PlacedTensor& p = layout_.find(t);
  if (p.is_vec) throw EngineError("vulkan: " + std::string(t->name) + " is not a matrix");
  return {buffers_[p.buffer].handle(), p.offset, p.bound_bytes()};
}

}  // namespace rwkvd::engine::vk
