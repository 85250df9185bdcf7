#pragma once
// Produces the data of one planned output tensor (rwkv7_names.h) in its output type: the
// source elements, transposed or concatenated as the plan says, converted element by element.
// Large tensors come out in pieces of bounded size, so converting a multi-GB embedding never
// holds it whole in memory.
#include <cstddef>
#include <functional>
#include <span>

#include "engine/convert/rwkv7_names.h"
#include "engine/ggml_type.h"

namespace rwkvd::engine::convert {

using ByteSink = std::function<void(std::span<const std::byte>)>;
using FloatSink = std::function<void(std::span<const float>)>;

// Writes the tensor's bytes as `type` to `sink`, in order. A source already of that type is
// copied through untouched; anything else goes through float32 (exact for F16/BF16 sources) and
// engine/quant's quantize(): F16/BF16 round to nearest even, as numpy and llama.cpp do. Throws
// EngineError if a row is not a whole number of the type's blocks.
void emit_tensor(const MappedTensor& t, GgmlType type, const ByteSink& sink);

// The same elements as float32 (exact for every source type), for a quantiser. Pieces end on
// multiples of ne[0], so every piece is a whole number of rows.
void emit_tensor_f32(const MappedTensor& t, const FloatSink& sink);

}  // namespace rwkvd::engine::convert
