#pragma once
// The tensors of a synthetic RWKV-7 in llama.cpp's layout and order, each with its shape, type
// and the distribution its random values are drawn from.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/ggml_type.h"
#include "tools/synth/config.h"

namespace rwkvd::tools::synth {

// Values: kNormal -> a + b * N(0, 1); kUniform -> U(a, b). `stream` names the random stream
// (the tensor's own name, except that layer 0's unused v0/v1/v2 copy a0/a1/a2, as the
// converter does).
struct Init {
  enum class Kind { kNormal, kUniform };
  Kind kind = Kind::kNormal;
  float a = 0.0f, b = 0.0f;
  std::string stream;
};

struct PlannedTensor {
  std::string name;
  std::vector<int64_t> ne;
  engine::GgmlType type = engine::GgmlType::F32;
  Init init;
};

std::vector<PlannedTensor> plan_tensors(const SynthConfig& cfg);

// Fills `out` with elements [first, first + out.size()) of the tensor, in file order.
void fill_values(const Init& init, uint64_t seed, uint64_t first, std::span<float> out);

}  // namespace rwkvd::tools::synth
