#include "tools/synth/type_choice.h"

#include "engine/quant/type_policy.h"

namespace rwkvd::tools::synth {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

engine::GgmlType tensor_type(FileType ftype, std::string_view name, std::span<const int64_t> ne) {
  using engine::GgmlType;
  if (ftype == FileType::kF32) return GgmlType::F32;
  if (ftype == FileType::kF16) {
    // The converter's policy, not the quantizer's F16 (which also keeps a1/a2/v1/v2/g1/g2 in
    // F32): a synthetic f16 file looks like what `convert_hf_to_gguf --outtype f16` writes.
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    if (rows == 1 || contains(name, "time_mix_w1.") || contains(name, "time_mix_w2.") ||
        contains(name, "time_mix_lerp_fused.")) {
      return GgmlType::F32;
    }
    return GgmlType::F16;
  }
  return engine::rwkv7_tensor_type(quant_ftype(ftype), name, ne);
}

}  // namespace rwkvd::tools::synth
