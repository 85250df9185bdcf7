#pragma once
// The RWKV-7 name and shape mapping from BlinkDL's checkpoint names (`.pth`, web-rwkv `.st`,
// rwkv.cpp `.bin`) to llama.cpp's GGUF layout, as llama.cpp's convert_hf_to_gguf does it
// (docs/CONVERT.md has the table). The plan says, for every output tensor, which source
// tensors feed it and how; emit.h turns that into bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/convert/source.h"

namespace rwkvd::engine::convert {

// Hyper-parameters read off the tensor shapes.
struct Rwkv7Dims {
  int64_t n_layer = 0;
  int64_t n_embd = 0;     // D
  int64_t n_vocab = 0;    // V
  int64_t n_ffn = 0;      // F
  int64_t head_size = 0;  // N (from r_k, which is (H, N))
  int64_t rank_w = 0, rank_a = 0, rank_v = 0, rank_g = 0;
};

enum class MapOp {
  kCopy,       // the one input's elements in order (a reshape at most)
  kTranspose,  // the one input is 2-D (rows, cols); write it as (cols, rows)
  kConcat,     // the inputs one after another (the six token-shift lerps r, w, k, v, a, g)
};

struct MappedTensor {
  std::string name;         // llama.cpp's name, e.g. "blk.3.time_mix_w1.weight"
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the contiguous dimension
  MapOp op = MapOp::kCopy;
  std::vector<const SourceTensor*> inputs;

  int64_t numel() const;
};

struct Rwkv7Plan {
  Rwkv7Dims dims;
  LoraLayout lora_layout = LoraLayout::kUnknown;  // as decided (never kUnknown)
  std::vector<MappedTensor> tensors;              // in llama.cpp's converter order
};

// Maps every tensor of `model`. `layout` overrides the model's own LoRA layout when not
// kUnknown; with neither, it is decided from the LoRA shapes (see docs/CONVERT.md). Throws
// EngineError naming the file and tensor on an unknown tensor name, a missing tensor, a shape
// that disagrees with the others, or an undecidable LoRA layout.
Rwkv7Plan plan_rwkv7(const SourceModel& model, LoraLayout layout = LoraLayout::kUnknown);

// llama.cpp's default LoRA rank when a config lacks it: max(1, round(D^e * m / 32)) * 32.
int64_t default_lora_rank(int64_t n_embd, double exponent, double multiplier);

}  // namespace rwkvd::engine::convert
