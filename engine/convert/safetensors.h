#pragma once
// Reader for SafeTensors files (web-rwkv's `.st`, and what tools/pth_to_st.py writes):
//
//   uint64 header_size (little-endian); header_size bytes of JSON:
//     {"__metadata__": {"key": "value", ...},          (optional, strings only)
//      "<name>": {"dtype": "F16", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
//   then the data section; offsets are relative to its start, shapes are row-major.
//
// F32, F16 and BF16 tensors are accepted; any other dtype is refused with its name.
#include <string>

#include "engine/convert/source.h"

namespace rwkvd::engine::convert {

// Whether `head` (the first bytes of a file) looks like a SafeTensors header.
bool looks_like_safetensors(std::span<const std::byte> head);

// Maps and indexes `path`, tensors in data order. The LoRA layout is left kUnknown unless the
// metadata says "rwkvd.lora_layout": "pytorch" or "transposed" (pth_to_st.py writes "pytorch").
// Throws EngineError naming the file (and tensor) on a malformed header, an unsupported dtype,
// data outside the file or overlapping, or a size that disagrees with the shape.
SourceModel read_safetensors(const std::string& path);

}  // namespace rwkvd::engine::convert
