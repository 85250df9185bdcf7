#include "engine/convert/source.h"

namespace rwkvd::engine::convert {

size_t source_dtype_size(SourceDtype t) {
  return t == SourceDtype::F32 ? 4 : 2;
}

std::string_view source_dtype_name(SourceDtype t) {
  switch (t) {
    case SourceDtype::F32:
      return "F32";
    case SourceDtype::F16:
      return "F16";
    case SourceDtype::BF16:
      return "BF16";
  }
  return "?";
}

int64_t SourceTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const SourceTensor* SourceModel::find(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace rwkvd::engine::convert
