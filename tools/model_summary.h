#pragma once
// What a GGUF model file holds, summed for people: the tensor data per type.
#include <cstdint>
#include <map>
#include <string>

#include "engine/gguf.h"

namespace rwkvd::tools {

struct TypeShare {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};
// Type name ("f32", "q8_0", ...) -> its tensors and bytes.
std::map<std::string, TypeShare> bytes_per_type(const engine::GgufFile& f);
// "q8_0 89%, f32 11%": the types by their share of the tensor bytes, largest first.
std::string weight_types(const engine::GgufFile& f);

}  // namespace rwkvd::tools
