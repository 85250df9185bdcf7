#include "tools/quantize/requantize.h"

#include <algorithm>
#include <vector>

#include "engine/error.h"
#include "engine/gguf_writer.h"
#include "engine/model.h"
#include "engine/quant/dequant.h"
#include "tools/synth/encode.h"

namespace rwkvd::tools::quantize {
namespace {

// Rows converted per step: about 16 MB of float32, so memory is bounded for any tensor.
constexpr int64_t kChunkFloats = 4 << 20;

}  // namespace

RequantizeResult requantize(const std::string& in_path, const std::string& out_path,
                            engine::QuantFtype ftype, const Progress& progress) {
  // Loading as a model validates it is a well-formed RWKV-7 before anything is written.
  auto model = engine::Rwkv7Model::load(in_path);
  const engine::GgufFile& in = model->file();
  engine::GgufWriter out(out_path);
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version") continue;
    out.add(key, engine::GgufMetaValue::copy_of(value));
  }
  out.add_u32("general.file_type", static_cast<uint32_t>(ftype));
  out.add_u32("general.quantization_version", 2);

  RequantizeResult result;
  std::vector<engine::GgmlType> types;
  for (const engine::GgufTensor& t : in.tensors()) {
    const engine::GgmlType type = engine::rwkv7_tensor_type(ftype, t);
    types.push_back(type);
    out.add_tensor(t.name, std::span<const int64_t>(t.ne.data(), t.n_dims), type);
    ++result.tensors_per_type[std::string(engine::ggml_traits(type).name)];
    result.in_bytes += t.n_bytes;
  }
  out.write_header();

  std::vector<float> rows;
  std::vector<std::byte> encoded;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const engine::GgufTensor& t = in.tensors()[i];
    out.begin_tensor(t.name);
    if (types[i] == t.type) {
      out.write(t.data);  // already in the target type: copied bit for bit
    } else {
      const int64_t width = t.ne[0], n_rows = t.n_rows();
      const int64_t chunk_rows = std::max<int64_t>(1, kChunkFloats / width);
      const uint64_t in_row_bytes = *engine::ggml_row_bytes(t.type, static_cast<uint64_t>(width));
      const uint64_t out_row_bytes = *engine::ggml_row_bytes(types[i], static_cast<uint64_t>(width));
      for (int64_t r = 0; r < n_rows; r += chunk_rows) {
        const int64_t n = std::min(chunk_rows, n_rows - r);
        rows.resize(static_cast<size_t>(n * width));
        encoded.resize(static_cast<size_t>(n) * out_row_bytes);
        engine::dequantize(t.type, t.data.data() + static_cast<uint64_t>(r) * in_row_bytes,
                           rows.data(), n * width);
        synth::encode(types[i], rows.data(), encoded.data(), n * width);
        out.write(encoded);
        if (progress) progress(out.bytes_written(), out.file_size(), t.name);
      }
    }
    out.end_tensor();
    if (progress) progress(out.bytes_written(), out.file_size(), t.name);
  }
  out.finish();
  result.out_bytes = out.file_size();
  return result;
}

}  // namespace rwkvd::tools::quantize
