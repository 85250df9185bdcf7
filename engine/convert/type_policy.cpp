#include "engine/convert/type_policy.h"

#include <span>

namespace rwkvd::engine::convert {

std::optional<QuantFtype> parse_file_type(std::string_view name) {
  return parse_quant_ftype(name);
}

bool is_quantised(QuantFtype ftype) {
  return ftype != QuantFtype::F32 && ftype != QuantFtype::F16 && ftype != QuantFtype::BF16;
}

GgmlType tensor_type(const MappedTensor& t, QuantFtype ftype) {
  if (is_quantised(ftype)) return rwkv7_tensor_type(ftype, t.name, t.ne);
  const GgmlType base = quant_ftype_base_type(ftype);
  if (base == GgmlType::F32 || t.ne.size() <= 1 || t.name.ends_with(".time_mix_w1.weight") ||
      t.name.ends_with(".time_mix_w2.weight") || t.name.ends_with(".time_mix_lerp_fused.weight")) {
    return GgmlType::F32;
  }
  return base;
}

}  // namespace rwkvd::engine::convert
