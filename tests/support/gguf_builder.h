#pragma once
// Builds GGUF bytes with raw control over every field, so tests can write valid files and
// every flavour of broken one (wrong counts, lengths, types, offsets). Deliberately shares no
// code with engine/gguf*.cpp: block sizes and layout are restated here from the format.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::test {

// Little-endian encodings of GGUF fields.
namespace enc {
std::string u8(uint8_t v);
std::string u32(uint32_t v);
std::string i32(int32_t v);
std::string u64(uint64_t v);
std::string i64(int64_t v);
std::string f32(float v);
// A GGUF string: u64 length then the bytes; `len` overrides the length field.
std::string str(std::string_view s, std::optional<uint64_t> len = std::nullopt);
// An array payload: element type, count, then the already encoded elements.
std::string array(uint32_t elem_type, uint64_t count, const std::string& elems);
std::string str_array(const std::vector<std::string>& items);
std::string i32_array(const std::vector<int32_t>& items);
}  // namespace enc

// GGUF value type ids (restated, not taken from the engine).
namespace vt {
constexpr uint32_t U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
                   STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12;
}

struct RawKv {
  std::string key;
  uint32_t type = vt::U32;
  std::string value;                // encoded payload after the type tag
  std::optional<uint64_t> key_len;  // written instead of key.size()
};

struct RawTensor {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type = 0;                 // ggml type id
  std::optional<uint32_t> n_dims;    // written instead of ne.size()
  std::optional<uint64_t> offset;    // written instead of the packed offset
  std::optional<uint64_t> name_len;  // written instead of name.size()
};

class GgufBuilder {
 public:
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors;  // written instead of tensors.size()
  std::optional<uint64_t> n_kv;       // written instead of kv.size()
  uint32_t alignment = 32;            // for packing offsets and padding (not written as a key)
  std::vector<RawKv> kv;
  std::vector<RawTensor> tensors;
  // Size of the data section; default: the packed tensors (0 if that is absurdly large).
  std::optional<uint64_t> data_bytes;

  GgufBuilder& add_kv(std::string key, uint32_t type, std::string value);
  GgufBuilder& add_u32(std::string key, uint32_t v) {
    return add_kv(std::move(key), vt::U32, enc::u32(v));
  }
  GgufBuilder& add_f32(std::string key, float v) {
    return add_kv(std::move(key), vt::F32, enc::f32(v));
  }
  GgufBuilder& add_string(std::string key, std::string_view v) {
    return add_kv(std::move(key), vt::STRING, enc::str(v));
  }
  // Replaces the type and value of an existing key (throws std::out_of_range if absent).
  GgufBuilder& set_kv(std::string_view key, uint32_t type, std::string value);
  GgufBuilder& add_tensor(std::string name, std::vector<int64_t> ne, uint32_t type = 0);
  RawTensor& tensor(std::string_view name);  // throws std::out_of_range
  RawKv& key(std::string_view name);         // throws std::out_of_range
  void remove_tensor(std::string_view name);

  // Offsets each tensor would get packed in order (aligned), and the bytes of each.
  std::vector<uint64_t> packed_offsets() const;
  static uint64_t tensor_bytes(const RawTensor& t);  // saturates; 0 for unknown types
  std::string header() const;                        // up to the end of the tensor table
  uint64_t data_offset() const;                      // header rounded up to the alignment
  uint64_t data_size() const;
  // The whole file. Data bytes follow a fixed pattern (byte i of the section = pattern_byte(i)).
  std::string bytes() const;
  static uint8_t pattern_byte(uint64_t i) { return static_cast<uint8_t>(i * 131 + 7); }
  // Writes the file; with `sparse`, the data section is a hole made by ftruncate.
  void write(const std::filesystem::path& path, bool sparse = false) const;
};

// A directory removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void write_bytes(const std::filesystem::path& path, std::string_view bytes);

}  // namespace rwkvd::test
