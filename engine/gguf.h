#pragma once
// Reader for GGUF v2/v3 files as llama.cpp writes them. The file is mmapped; metadata strings
// and tensor data are views into the mapping, so opening copies nothing large. Every read is
// bounds-checked and every size computation overflow-checked: a malformed file produces an
// EngineError naming the file and the key or tensor at fault, never a crash.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "engine/ggml_type.h"
#include "engine/mapped_file.h"

namespace rwkvd::engine {

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);

struct GgufValue;

// An array value. Scalar elements stay in the file (`raw`, little-endian); strings and nested
// arrays are decoded into views.
struct GgufArray {
  GgufValueType elem_type = GgufValueType::U8;
  uint64_t count = 0;
  std::span<const std::byte> raw;          // scalar element bytes
  std::vector<std::string_view> strings;   // elem_type == STRING
  std::vector<GgufValue> arrays;           // elem_type == ARRAY
};

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  // Integers widen to uint64_t/int64_t, floats to double.
  std::variant<uint64_t, int64_t, double, bool, std::string_view, GgufArray> value;
};

struct GgufTensor {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the contiguous dimension
  uint64_t offset = 0;                    // absolute offset in the file
  uint64_t n_bytes = 0;
  std::span<const std::byte> data;        // view into the mapping
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

struct GgufLimits {
  uint64_t max_kv = 1u << 20;
  uint64_t max_tensors = 1u << 20;
  uint64_t max_key_bytes = 1u << 16;
  uint32_t max_name_bytes = 63;  // llama.cpp's GGML_MAX_NAME (64) less the terminator
  uint32_t max_alignment = 1u << 16;
  uint32_t max_array_depth = 4;
};

class GgufFile {
 public:
  // Opens and validates `path`. Throws EngineError on anything malformed.
  static std::unique_ptr<GgufFile> open(const std::string& path, const GgufLimits& limits = {});

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_.size(); }
  const MappedFile& mapping() const { return file_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: throw EngineError naming the key if missing or of an unfitting type.
  // Integer getters accept any integer type whose value fits.
  uint32_t get_u32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;
  const GgufArray& get_array(std::string_view key) const;

  // Tensors in file order, and lookup by name.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const GgufTensor& tensor(std::string_view name) const;  // throws if missing

 private:
  explicit GgufFile(MappedFile file) : file_(std::move(file)) {}
  void parse(const GgufLimits& limits);

  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Printable form of a value, arrays abbreviated to their first `max_elems` elements.
std::string gguf_value_to_string(const GgufValue& v, size_t max_elems = 8);

}  // namespace rwkvd::engine
