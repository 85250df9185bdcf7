#include "engine/convert/emit.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/error.h"
#include "engine/quant/dequant.h"

namespace rwkvd::engine::convert {
namespace {

// Elements per piece: 4 MB of float32, small next to any model, large enough to stream fast.
constexpr int64_t kPieceElems = int64_t{1} << 20;

using PieceFn = std::function<void(SourceDtype, std::span<const std::byte>)>;

// Slices one run of elements into pieces of at most `piece` elements.
void slice(SourceDtype dtype, std::span<const std::byte> bytes, int64_t piece, const PieceFn& fn) {
  const size_t es = source_dtype_size(dtype);
  const size_t step = static_cast<size_t>(piece) * es;
  for (size_t off = 0; off < bytes.size(); off += step) {
    fn(dtype, bytes.subspan(off, std::min(step, bytes.size() - off)));
  }
}

// (rows, cols) -> (cols, rows), moving whole elements of the source type so that nothing is
// rounded on the way. LoRA matrices are small (D x rank), so this is done in one buffer.
std::vector<std::byte> transposed(const SourceTensor& t) {
  const size_t es = source_dtype_size(t.dtype);
  const auto rows = static_cast<size_t>(t.shape[0]);
  const auto cols = static_cast<size_t>(t.shape[1]);
  std::vector<std::byte> out(t.data.size());
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      std::memcpy(&out[(c * rows + r) * es], &t.data[(r * cols + c) * es], es);
    }
  }
  return out;
}

// Calls `fn` with the tensor's source elements in output order, in pieces that end on whole
// output rows (ne[0] elements) and hold at most max(kPieceElems, ne[0]) elements.
void walk(const MappedTensor& t, const PieceFn& fn) {
  int64_t total = 0;
  for (const auto* in : t.inputs) total += in->numel();
  if (total != t.numel()) {
    throw EngineError("internal: " + t.name + " has " + std::to_string(total) +
                      " source elements for " + std::to_string(t.numel()));
  }
  const int64_t row = t.ne.empty() ? 1 : t.ne[0];
  const int64_t piece = std::max<int64_t>(1, kPieceElems / row) * row;
  switch (t.op) {
    case MapOp::kCopy:
    case MapOp::kConcat:
      for (const auto* in : t.inputs) slice(in->dtype, in->data, piece, fn);
      break;
    case MapOp::kTranspose: {
      const auto* in = t.inputs.at(0);
      const auto bytes = transposed(*in);
      slice(in->dtype, bytes, piece, fn);
      break;
    }
  }
}

// float32 -> IEEE half, round to nearest even (numpy's astype(float16), F16C), keeping
// subnormals. TODO(quant): use engine/quant's fp32_to_fp16 once that branch defines it.
uint16_t to_half(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (abs < 0x38800000u) {
    // Below 2^-14 the half is a multiple of 2^-24: scale exactly, round ties to even.
    const float scaled = std::bit_cast<float>(abs) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Rebias the exponent (127 -> 15), drop 13 mantissa bits with ties to even; a carry out of the
  // mantissa bumps the exponent, which is right.
  return static_cast<uint16_t>(sign | ((abs - 0x38000000u + 0x0fffu + ((abs >> 13) & 1u)) >> 13));
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float element_f32(SourceDtype dtype, const std::byte* p) {
  switch (dtype) {
    case SourceDtype::F32:
      return load<float>(p);
    case SourceDtype::F16:
      return fp16_to_fp32(load<uint16_t>(p));
    case SourceDtype::BF16:
      return bf16_to_fp32(load<uint16_t>(p));
  }
  return 0.0f;
}

void to_f32(SourceDtype dtype, std::span<const std::byte> in, std::vector<float>& out) {
  const size_t es = source_dtype_size(dtype);
  out.resize(in.size() / es);
  for (size_t i = 0; i < out.size(); ++i) out[i] = element_f32(dtype, &in[i * es]);
}

}  // namespace

void emit_tensor(const MappedTensor& t, GgmlType type, const ByteSink& sink) {
  if (type != GgmlType::F32 && type != GgmlType::F16) {
    throw EngineError("internal: emit_tensor writes F32 or F16, not " +
                      std::string(ggml_traits(type).name));
  }
  std::vector<float> f;
  std::vector<uint16_t> h;
  walk(t, [&](SourceDtype dtype, std::span<const std::byte> in) {
    if ((dtype == SourceDtype::F32 && type == GgmlType::F32) ||
        (dtype == SourceDtype::F16 && type == GgmlType::F16)) {
      sink(in);  // same type: the bytes are the answer
      return;
    }
    to_f32(dtype, in, f);
    if (type == GgmlType::F32) {
      sink(std::as_bytes(std::span<const float>(f)));
      return;
    }
    h.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = to_half(f[i]);
    sink(std::as_bytes(std::span<const uint16_t>(h)));
  });
}

void emit_tensor_f32(const MappedTensor& t, const FloatSink& sink) {
  std::vector<float> f;
  walk(t, [&](SourceDtype dtype, std::span<const std::byte> in) {
    to_f32(dtype, in, f);
    sink(f);
  });
}

}  // namespace rwkvd::engine::convert
