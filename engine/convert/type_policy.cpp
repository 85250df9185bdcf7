#include "engine/convert/type_policy.h"

#include <string_view>

#include "engine/error.h"

namespace rwkvd::engine::convert {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

GgmlType tensor_type(const MappedTensor& t, GgmlType file_type) {
  switch (file_type) {
    case GgmlType::F32:
      return GgmlType::F32;
    case GgmlType::F16:
      if (t.ne.size() <= 1 || ends_with(t.name, ".time_mix_w1.weight") ||
          ends_with(t.name, ".time_mix_w2.weight") ||
          ends_with(t.name, ".time_mix_lerp_fused.weight")) {
        return GgmlType::F32;
      }
      return GgmlType::F16;
    default:
      throw EngineError("convert: output type " + std::string(ggml_traits(file_type).name) +
                        " is not supported yet (f32 or f16)");
  }
}

uint32_t llama_file_type(GgmlType file_type) {
  switch (file_type) {
    case GgmlType::F32:
      return 0;
    case GgmlType::F16:
      return 1;
    default:
      throw EngineError("convert: no llama_ftype for " + std::string(ggml_traits(file_type).name));
  }
}

}  // namespace rwkvd::engine::convert
