#pragma once
// Streaming writer for GGUF v3 files. Metadata and the tensor table are declared first and
// written as the header; tensor data then streams in, tensor by tensor and in as many chunks as
// the caller likes, so a multi-GB model is written with bounded memory. The writer checks
// everything the reader (engine/gguf.h) checks, so it cannot produce a file rwkvd rejects.
// The file appears under its name only once finish() succeeds (it is written beside it as
// "<path>.partial" and renamed), so an interrupted run never leaves a plausible-looking model.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "engine/ggml_type.h"
#include "engine/gguf.h"

namespace rwkvd::engine {

// A metadata value ready to write: its type and its little-endian encoding (the bytes that
// follow the type tag in the file). Arrays of arrays are built from arrays.
class GgufMetaValue {
 public:
  static GgufMetaValue u8(uint8_t v) { return scalar(GgufValueType::U8, v); }
  static GgufMetaValue i8(int8_t v) { return scalar(GgufValueType::I8, v); }
  static GgufMetaValue u16(uint16_t v) { return scalar(GgufValueType::U16, v); }
  static GgufMetaValue i16(int16_t v) { return scalar(GgufValueType::I16, v); }
  static GgufMetaValue u32(uint32_t v) { return scalar(GgufValueType::U32, v); }
  static GgufMetaValue i32(int32_t v) { return scalar(GgufValueType::I32, v); }
  static GgufMetaValue u64(uint64_t v) { return scalar(GgufValueType::U64, v); }
  static GgufMetaValue i64(int64_t v) { return scalar(GgufValueType::I64, v); }
  static GgufMetaValue f32(float v) { return scalar(GgufValueType::F32, v); }
  static GgufMetaValue f64(double v) { return scalar(GgufValueType::F64, v); }
  static GgufMetaValue boolean(bool v) { return scalar(GgufValueType::BOOL, uint8_t{v}); }
  static GgufMetaValue string(std::string_view v);

  // Arrays of scalars; the element type follows from T (bool arrays: use array_of_bool).
  template <typename T>
  requires std::is_arithmetic_v<T> &&(!std::is_same_v<T, bool>)static GgufMetaValue
      array(std::span<const T> v) {
    return scalar_array(type_of<T>(), v.data(), sizeof(T), v.size());
  }
  static GgufMetaValue array_of_bool(std::span<const bool> v);
  static GgufMetaValue strings(std::span<const std::string> v);
  // An array whose elements are arrays (of any element types).
  static GgufMetaValue arrays(std::span<const GgufMetaValue> v);
  // The same value as one read from a file (to copy metadata from one GGUF to another).
  static GgufMetaValue copy_of(const GgufValue& v);

  GgufValueType type() const { return type_; }
  const std::string& encoded() const { return bytes_; }

 private:
  template <typename T>
  static GgufMetaValue scalar(GgufValueType t, T v) {
    return scalar_array_body(t, &v, sizeof(T));
  }
  static GgufMetaValue scalar_array_body(GgufValueType t, const void* p, size_t n);
  static GgufMetaValue scalar_array(GgufValueType elem, const void* p, size_t elem_size,
                                    size_t count);
  template <typename T>
  static constexpr GgufValueType type_of() {
    if constexpr (std::is_same_v<T, uint8_t>) return GgufValueType::U8;
    if constexpr (std::is_same_v<T, int8_t>) return GgufValueType::I8;
    if constexpr (std::is_same_v<T, uint16_t>) return GgufValueType::U16;
    if constexpr (std::is_same_v<T, int16_t>) return GgufValueType::I16;
    if constexpr (std::is_same_v<T, uint32_t>) return GgufValueType::U32;
    if constexpr (std::is_same_v<T, int32_t>) return GgufValueType::I32;
    if constexpr (std::is_same_v<T, uint64_t>) return GgufValueType::U64;
    if constexpr (std::is_same_v<T, int64_t>) return GgufValueType::I64;
    if constexpr (std::is_same_v<T, float>) return GgufValueType::F32;
    if constexpr (std::is_same_v<T, double>) return GgufValueType::F64;
  }

  GgufValueType type_ = GgufValueType::U8;
  std::string bytes_;
};

// One declared tensor: where its data lands relative to the data section.
struct GgufWriterTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;
  uint64_t offset = 0;  // relative to the data section; known once the header is written
  uint64_t n_bytes = 0;
};

class GgufWriter {
 public:
  // Nothing touches the disk until write_header().
  explicit GgufWriter(std::string path);
  ~GgufWriter();  // an unfinished file is removed
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, written in the order added. Throws EngineError on an empty, oversized or
  // duplicate key, and on a general.alignment that is not a u32 power of two within the
  // reader's limit; a valid general.alignment replaces the default of 32.
  void add(std::string_view key, GgufMetaValue value);
  void add_u32(std::string_view key, uint32_t v) { add(key, GgufMetaValue::u32(v)); }
  void add_f32(std::string_view key, float v) { add(key, GgufMetaValue::f32(v)); }
  void add_string(std::string_view key, std::string_view v) { add(key, GgufMetaValue::string(v)); }

  // Declares a tensor (data written later, in declaration order). Throws EngineError on a
  // name that is empty, too long or taken, on 0 or >4 dims, on a non-positive dimension, on
  // ne[0] not a whole number of blocks of `type`, and on sizes overflowing 64 bits.
  void add_tensor(std::string_view name, std::span<const int64_t> ne, GgmlType type);
  void add_tensor(std::string_view name, std::initializer_list<int64_t> ne, GgmlType type) {
    add_tensor(name, std::span<const int64_t>(ne.begin(), ne.size()), type);
  }

  // Creates the file and writes the header and tensor table; no more declarations after this.
  void write_header();

  // Streams the next tensor's data: begin_tensor (names must follow declaration order), any
  // number of write() calls adding up to exactly its byte size, end_tensor (adds the padding).
  void begin_tensor(std::string_view name);
  void write(std::span<const std::byte> bytes);
  // n bytes of zeros, left as a hole in the file (no disk used where the file system makes
  // sparse files).
  void write_zeros(uint64_t n);
  void end_tensor();
  void write_tensor(std::string_view name, std::span<const std::byte> bytes) {
    begin_tensor(name);
    write(bytes);
    end_tensor();
  }

  // Checks every tensor was written, flushes, closes and moves the file into place.
  void finish();

  const std::vector<GgufWriterTensor>& tensors() const { return tensors_; }
  uint32_t alignment() const { return alignment_; }
  // Total file size (known after write_header) and bytes written so far, for progress.
  uint64_t file_size() const { return data_offset_ + data_size_; }
  uint64_t bytes_written() const { return written_; }

 private:
  enum class State { kDeclaring, kData, kInTensor, kFinished };
  [[noreturn]] void fail(const std::string& msg) const;
  void put(const void* p, size_t n);
  void take_tensor_bytes(uint64_t n);
  void pad_to_alignment();

  std::string path_;
  std::string partial_path_;
  State state_ = State::kDeclaring;
  GgufLimits limits_;
  uint32_t alignment_ = 32;
  std::string metadata_;  // encoded key/value pairs
  uint64_t n_kv_ = 0;
  std::unordered_set<std::string> keys_;
  std::vector<GgufWriterTensor> tensors_;
  std::unordered_set<std::string> tensor_names_;
  std::FILE* file_ = nullptr;
  uint64_t data_offset_ = 0;
  uint64_t data_size_ = 0;
  uint64_t written_ = 0;
  size_t next_tensor_ = 0;       // the tensor begin_tensor expects
  uint64_t tensor_written_ = 0;  // bytes of the current tensor so far
};

}  // namespace rwkvd::engine
