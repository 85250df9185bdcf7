#pragma once
// What every input reader of `rwkvd convert` produces: the checkpoint's tensors under their own
// names, as views into the mapped input file. Nothing is converted or copied here; the mapper
// (rwkv7_names.h) decides names and shapes and the emitter (emit.h) converts the data.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/mapped_file.h"

namespace rwkvd::engine::convert {

// Element types the readers accept. Quantised checkpoints are refused by the readers.
enum class SourceDtype { F32, F16, BF16 };
size_t source_dtype_size(SourceDtype t);
std::string_view source_dtype_name(SourceDtype t);

struct SourceTensor {
  std::string name;
  // Row-major shape, slowest dimension first (PyTorch order; the reverse of GGUF's ne).
  std::vector<int64_t> shape;
  SourceDtype dtype = SourceDtype::F32;
  // Little-endian elements in row-major order, exactly numel() * element size bytes. Not
  // necessarily aligned: read elements with memcpy.
  std::span<const std::byte> data;

  int64_t numel() const;
};

// How a checkpoint stores the LoRA matrices (w1/w2, a1/a2, v1/v2, g1/g2).
enum class LoraLayout {
  kUnknown,     // decide from the shapes (rwkv7_names.h)
  kPytorch,     // as nn.Parameter in BlinkDL's model: w1 is (D, R), used as x @ w1
  kTransposed,  // already as llama.cpp stores them: w1 is (R, D) (rwkv.cpp, web-rwkv)
};

struct SourceModel {
  std::string path;
  std::string format;  // for messages: "rwkv.cpp .bin", "safetensors"
  LoraLayout lora_layout = LoraLayout::kUnknown;
  std::vector<SourceTensor> tensors;            // in file order
  std::map<std::string, std::string> metadata;  // safetensors "__metadata__", if any
  std::unique_ptr<MappedFile> file;             // owns the bytes the tensors view

  const SourceTensor* find(std::string_view name) const;
};

// Shape as "[a, b, c]" for messages.
std::string shape_string(std::span<const int64_t> shape);

}  // namespace rwkvd::engine::convert
