#include "engine/convert/emit.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/error.h"
#include "engine/quant/dequant.h"
#include "engine/quant/quantize.h"

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
  std::vector<float> f;
  std::vector<std::byte> out;
  walk(t, [&](SourceDtype dtype, std::span<const std::byte> in) {
    if ((dtype == SourceDtype::F32 && type == GgmlType::F32) ||
        (dtype == SourceDtype::F16 && type == GgmlType::F16) ||
        (dtype == SourceDtype::BF16 && type == GgmlType::BF16)) {
      sink(in);  // same type: the bytes are the answer, NaN payloads and all
      return;
    }
    to_f32(dtype, in, f);
    const auto bytes = ggml_row_bytes(type, f.size());
    if (!bytes) {
      throw EngineError(t.name + ": " + std::to_string(t.ne[0]) + " elements per row is not " +
                        "a whole number of " + std::string(ggml_traits(type).name) + " blocks");
    }
    out.resize(*bytes);
    quantize(type, f, out);  // pieces are whole rows, so whole blocks
    sink(out);
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
