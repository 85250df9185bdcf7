#include "engine/convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace rwkvd::engine::convert {
namespace {

// The reference implementation refuses headers over 100 MB; a real model's is a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

SourceDtype dtype_of(const std::string& s, const std::string& where) {
  if (s == "F32") return SourceDtype::F32;
  if (s == "F16") return SourceDtype::F16;
  if (s == "BF16") return SourceDtype::BF16;
  throw EngineError(where + ": dtype " + s + " is not supported (F32, F16 or BF16)");
}

uint64_t u64_of(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_unsigned()) throw EngineError(where + " is not a non-negative integer");
  return v.get<uint64_t>();
}

// One tensor entry; `data` is the data section. Offsets are checked against it and the byte
// count against the shape, with overflow checks, before any view is made.
SourceTensor parse_entry(const std::string& name, const nlohmann::json& e,
                         std::span<const std::byte> data, const std::string& path) {
  const std::string where = path + ": tensor " + name;
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets")) {
    throw EngineError(where + ": entry needs dtype, shape and data_offsets");
  }
  if (!e["dtype"].is_string()) throw EngineError(where + ": dtype is not a string");
  SourceTensor t;
  t.name = name;
  t.dtype = dtype_of(e["dtype"].get<std::string>(), where);
  const auto& shape = e["shape"];
  const auto& offsets = e["data_offsets"];
  if (!shape.is_array() || shape.size() > 8) throw EngineError(where + ": bad shape");
  if (!offsets.is_array() || offsets.size() != 2) throw EngineError(where + ": bad data_offsets");
  uint64_t bytes = source_dtype_size(t.dtype);
  for (const auto& d : shape) {
    const uint64_t n = u64_of(d, where + ": a dimension");
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (n != 0 && bytes > std::numeric_limits<uint64_t>::max() / n)) {
      throw EngineError(where + ": shape overflows");
    }
    bytes *= n;
    t.shape.push_back(static_cast<int64_t>(n));
  }
  const uint64_t begin = u64_of(offsets[0], where + ": data_offsets[0]");
  const uint64_t end = u64_of(offsets[1], where + ": data_offsets[1]");
  if (begin > end || end > data.size()) {
    throw EngineError(where + ": data_offsets [" + std::to_string(begin) + ", " +
                      std::to_string(end) + "] outside the " + std::to_string(data.size()) +
                      "-byte data section (truncated file?)");
  }
  if (end - begin != bytes) {
    throw EngineError(where + ": " + std::to_string(end - begin) + " bytes of data but shape " +
                      shape_string(t.shape) + " needs " + std::to_string(bytes));
  }
  t.data = data.subspan(static_cast<size_t>(begin), static_cast<size_t>(bytes));
  return t;
}

void read_metadata(const nlohmann::json& meta, SourceModel& m) {
  if (!meta.is_object()) throw EngineError(m.path + ": __metadata__ is not an object");
  for (const auto& [k, v] : meta.items()) {
    if (!v.is_string()) throw EngineError(m.path + ": __metadata__." + k + " is not a string");
    m.metadata[k] = v.get<std::string>();
  }
  if (auto it = m.metadata.find("rwkvd.lora_layout"); it != m.metadata.end()) {
    if (it->second == "pytorch") {
      m.lora_layout = LoraLayout::kPytorch;
    } else if (it->second == "transposed") {
      m.lora_layout = LoraLayout::kTransposed;
    } else {
      throw EngineError(m.path + ": __metadata__.rwkvd.lora_layout is \"" + it->second +
                        "\" (expected pytorch or transposed)");
    }
  }
}

// Tensors may not share bytes: an overlap means the offsets are corrupt.
void check_no_overlap(std::vector<SourceTensor>& tensors, const std::string& path) {
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.data.data() < b.data.data(); });
  for (size_t i = 1; i < tensors.size(); ++i) {
    const auto& prev = tensors[i - 1];
    if (prev.data.data() + prev.data.size() > tensors[i].data.data()) {
      throw EngineError(path + ": tensors " + prev.name + " and " + tensors[i].name +
                        " overlap in the data section");
    }
  }
}

}  // namespace

bool looks_like_safetensors(std::span<const std::byte> head) {
  if (head.size() < 9) return false;
  uint64_t n;
  std::memcpy(&n, head.data(), 8);
  return n >= 2 && n <= kMaxHeaderBytes && head[8] == std::byte{'{'};
}

SourceModel read_safetensors(const std::string& path) {
  SourceModel m;
  m.path = path;
  m.format = "safetensors";
  m.file = std::make_unique<MappedFile>(path);
  const auto bytes = m.file->bytes();
  if (bytes.size() < 8) throw EngineError(path + ": too short for a SafeTensors header");
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxHeaderBytes || header_size > bytes.size() - 8) {
    throw EngineError(path + ": SafeTensors header of " + std::to_string(header_size) +
                      " bytes does not fit the " + std::to_string(bytes.size()) +
                      "-byte file (truncated, or not a SafeTensors file)");
  }
  const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);
  const auto header = nlohmann::json::parse(text, text + header_size, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    throw EngineError(path + ": SafeTensors header is not a JSON object");
  }
  const auto data = bytes.subspan(8 + static_cast<size_t>(header_size));
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      read_metadata(entry, m);
    } else {
      m.tensors.push_back(parse_entry(name, entry, data, path));
    }
  }
  if (m.tensors.empty()) throw EngineError(path + ": no tensors in the SafeTensors header");
  check_no_overlap(m.tensors, path);
  return m;
}

}  // namespace rwkvd::engine::convert
