#pragma once
// The ggml tensor types that GGUF files carry: ids as llama.cpp numbers them, block geometry,
// and which of them rwkvd can read.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rwkvd::engine {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // as llama.cpp prints it: "f32", "q4_K", ...
  uint32_t block_elems;   // elements per block (1 for plain floats)
  uint32_t block_bytes;   // bytes per block
};

// Traits of a type rwkvd supports, or nullopt (use ggml_type_name for the message).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t raw_type);
const GgmlTypeTraits& ggml_traits(GgmlType type);

// A printable name for any raw id, including types ggml has but rwkvd does not read
// ("iq2_xxs"), or "type#N" for ids nobody knows.
std::string ggml_type_name(uint32_t raw_type);

// Parses "f32", "Q4_K", "q8_0", ... (case-insensitive); nullopt if unknown.
std::optional<GgmlType> parse_ggml_type(std::string_view name);

// Bytes of a row of `n_elems` elements; nullopt if n_elems is not a whole number of blocks.
std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n_elems);

}  // namespace rwkvd::engine
