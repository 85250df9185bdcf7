#include "engine/ggml_type.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "engine/error.h"

namespace rwkvd::engine {
namespace {

constexpr std::array<GgmlTypeTraits, 11> kSupported{{
    {GgmlType::F32, "f32", 1, 4},
    {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", 32, 18},
    {GgmlType::Q4_1, "q4_1", 32, 20},
    {GgmlType::Q5_0, "q5_0", 32, 22},
    {GgmlType::Q5_1, "q5_1", 32, 24},
    {GgmlType::Q8_0, "q8_0", 32, 34},
    {GgmlType::Q4_K, "q4_K", 256, 144},
    {GgmlType::Q5_K, "q5_K", 256, 176},
    {GgmlType::Q6_K, "q6_K", 256, 210},
    {GgmlType::BF16, "bf16", 1, 2},
}};

// Names of ggml types that exist but that rwkvd does not read, for error messages.
constexpr std::array<std::string_view, 40> kAllNames{
    "f32",    "f16",     "q4_0",  "q4_1",    "q4_2",   "q4_3",   "q5_0",   "q5_1",
    "q8_0",   "q8_1",    "q2_K",  "q3_K",    "q4_K",   "q5_K",   "q6_K",   "q8_K",
    "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",  "iq2_s",  "iq4_xs",
    "i8",     "i16",     "i32",   "i64",     "f64",    "iq1_m",  "bf16",   "q4_0_4_4",
    "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8",
    "mxfp4"};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t raw_type) {
  for (const auto& t : kSupported) {
    if (static_cast<uint32_t>(t.type) == raw_type) return t;
  }
  return std::nullopt;
}

const GgmlTypeTraits& ggml_traits(GgmlType type) {
  for (const auto& t : kSupported) {
    if (t.type == type) return t;
  }
  throw EngineError("internal: no traits for ggml type " +
                    std::to_string(static_cast<uint32_t>(type)));
}

std::string ggml_type_name(uint32_t raw_type) {
  if (raw_type < kAllNames.size()) return std::string(kAllNames[raw_type]);
  return "type#" + std::to_string(raw_type);
}

std::optional<GgmlType> parse_ggml_type(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
  };
  const std::string want = lower(name);
  for (const auto& t : kSupported) {
    if (lower(t.name) == want) return t.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n_elems) {
  const auto& t = ggml_traits(type);
  if (n_elems % t.block_elems != 0) return std::nullopt;
  return n_elems / t.block_elems * t.block_bytes;
}

}  // namespace rwkvd::engine
