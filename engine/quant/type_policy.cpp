#include "engine/quant/type_policy.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "engine/error.h"

namespace rwkvd::engine {
namespace {

struct FtypeInfo {
  QuantFtype ftype;
  std::string_view name;
  GgmlType base;
};

constexpr std::array<FtypeInfo, 11> kFtypes{{
    {QuantFtype::F32, "F32", GgmlType::F32},
    {QuantFtype::F16, "F16", GgmlType::F16},
    {QuantFtype::BF16, "BF16", GgmlType::BF16},
    {QuantFtype::Q8_0, "Q8_0", GgmlType::Q8_0},
    {QuantFtype::Q4_0, "Q4_0", GgmlType::Q4_0},
    {QuantFtype::Q4_1, "Q4_1", GgmlType::Q4_1},
    {QuantFtype::Q5_0, "Q5_0", GgmlType::Q5_0},
    {QuantFtype::Q5_1, "Q5_1", GgmlType::Q5_1},
    {QuantFtype::Q4_K_M, "Q4_K_M", GgmlType::Q4_K},
    {QuantFtype::Q5_K_M, "Q5_K_M", GgmlType::Q5_K},
    {QuantFtype::Q6_K, "Q6_K", GgmlType::Q6_K},
}};

const FtypeInfo& info(QuantFtype ftype) {
  for (const auto& f : kFtypes) {
    if (f.ftype == ftype) return f;
  }
  throw EngineError("unknown quantisation file type " +
                    std::to_string(static_cast<uint32_t>(ftype)));
}

// llama.cpp's llama_model_quantize skips these by name ("RWKV's small yet 2D weights"), in
// every ftype, F16 included.
constexpr std::array<std::string_view, 15> kNeverQuantised{
    "time_mix_first.weight",    "time_mix_w0.weight",       "time_mix_w1.weight",
    "time_mix_w2.weight",       "time_mix_v0.weight",       "time_mix_v1.weight",
    "time_mix_v2.weight",       "time_mix_a0.weight",       "time_mix_a1.weight",
    "time_mix_a2.weight",       "time_mix_g1.weight",       "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
};

bool fits(GgmlType type, int64_t ne0) {
  return ne0 % ggml_traits(type).block_elems == 0;
}

}  // namespace

std::optional<QuantFtype> parse_quant_ftype(std::string_view name) {
  for (const auto& f : kFtypes) {
    if (f.name.size() == name.size() &&
        std::equal(f.name.begin(), f.name.end(), name.begin(), [](char a, char b) {
          return std::toupper(static_cast<unsigned char>(a)) ==
                 std::toupper(static_cast<unsigned char>(b));
        })) {
      return f.ftype;
    }
  }
  return std::nullopt;
}

std::string_view quant_ftype_name(QuantFtype ftype) {
  return info(ftype).name;
}

GgmlType quant_ftype_base_type(QuantFtype ftype) {
  return info(ftype).base;
}

GgmlType rwkv7_tensor_type(QuantFtype ftype, std::string_view name, std::span<const int64_t> ne) {
  const GgmlType base = quant_ftype_base_type(ftype);
  // ggml_n_dims: trailing dimensions of 1 do not count.
  size_t n_dims = ne.size();
  while (n_dims > 1 && ne[n_dims - 1] == 1) --n_dims;
  if (base == GgmlType::F32 || !name.ends_with("weight") || n_dims < 2) return GgmlType::F32;
  for (const auto& s : kNeverQuantised) {
    if (name.find(s) != std::string_view::npos) return GgmlType::F32;
  }
  // Float ftypes are a plain conversion: llama.cpp applies its per-tensor rules to quantised
  // ftypes only.
  if (base == GgmlType::F16 || base == GgmlType::BF16) return base;

  const int64_t ne0 = ne[0];
  GgmlType type = base;
  if (name == "output.weight") {
    if (!fits(base, ne0)) {
      type = GgmlType::Q8_0;
    } else if (base != GgmlType::Q8_0) {
      type = GgmlType::Q6_K;
    }
  }
  if (!fits(type, ne0)) {
    switch (type) {
      case GgmlType::Q4_K:
        type = GgmlType::Q5_0;
        break;
      case GgmlType::Q5_K:
        type = GgmlType::Q5_1;
        break;
      case GgmlType::Q6_K:
        type = GgmlType::Q8_0;
        break;
      default:
        type = GgmlType::F16;
        break;
    }
    if (!fits(type, ne0)) type = GgmlType::F16;
  }
  return type;
}

GgmlType rwkv7_tensor_type(QuantFtype ftype, const GgufTensor& tensor) {
  return rwkv7_tensor_type(ftype, tensor.name,
                           std::span<const int64_t>(tensor.ne.data(), tensor.n_dims));
}

}  // namespace rwkvd::engine
