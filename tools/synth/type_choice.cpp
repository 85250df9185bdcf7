#include "tools/synth/type_choice.h"

#include <array>

namespace rwkvd::tools::synth {
namespace {

using engine::GgmlType;

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// llama.cpp's quantizer never touches these (it excludes them by name).
bool quantizer_keeps_f32(std::string_view name) {
  static constexpr std::array<std::string_view, 13> kKept{
      "time_mix_w0.", "time_mix_w1.",         "time_mix_w2.",       "time_mix_a0.", "time_mix_a1.",
      "time_mix_a2.", "time_mix_v0.",         "time_mix_v1.",       "time_mix_v2.", "time_mix_g1.",
      "time_mix_g2.", "time_mix_lerp_fused.", "channel_mix_lerp_k."};
  for (std::string_view k : kKept) {
    if (contains(name, k)) return true;
  }
  return false;
}

// llama.cpp's fallback when ne[0] is not a multiple of 256 for a k-quant; F16 when even the
// fallback's 32-element blocks do not divide the row.
GgmlType fit_row(GgmlType t, int64_t row) {
  if (row % engine::ggml_traits(t).block_elems == 0) return t;
  switch (t) {
    case GgmlType::Q4_K:
      t = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      t = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      t = GgmlType::Q8_0;
      break;
    default:
      break;
  }
  return row % engine::ggml_traits(t).block_elems == 0 ? t : GgmlType::F16;
}

}  // namespace

GgmlType tensor_type(FileType ftype, std::string_view name, std::span<const int64_t> ne) {
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  const bool is_vector = rows == 1;
  switch (ftype) {
    case FileType::kF32:
      return GgmlType::F32;
    case FileType::kF16:
      if (is_vector || contains(name, "time_mix_w1.") || contains(name, "time_mix_w2.") ||
          contains(name, "time_mix_lerp_fused.")) {
        return GgmlType::F32;
      }
      return GgmlType::F16;
    default:
      break;
  }
  if (is_vector || quantizer_keeps_f32(name)) return GgmlType::F32;
  const bool head = name == "output.weight";
  GgmlType base = GgmlType::F32;
  switch (ftype) {
    case FileType::kQ8_0:
      base = GgmlType::Q8_0;
      break;
    case FileType::kQ4_0:
      base = head ? GgmlType::Q6_K : GgmlType::Q4_0;
      break;
    case FileType::kQ4_K_M:
      base = head ? GgmlType::Q6_K : GgmlType::Q4_K;
      break;
    case FileType::kQ5_K_M:
      base = head ? GgmlType::Q6_K : GgmlType::Q5_K;
      break;
    case FileType::kQ6_K:
      base = GgmlType::Q6_K;
      break;
    case FileType::kF32:
    case FileType::kF16:
      break;
  }
  return fit_row(base, ne[0]);
}

}  // namespace rwkvd::tools::synth
