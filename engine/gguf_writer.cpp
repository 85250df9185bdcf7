#include "engine/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace rwkvd::engine {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr uint32_t kMaxDims = 4;

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian");

void append(std::string& out, const void* p, size_t n) {
  out.append(static_cast<const char*>(p), n);
}
template <typename T>
void append_pod(std::string& out, T v) {
  append(out, &v, sizeof(T));
}
void append_string(std::string& out, std::string_view s) {
  append_pod<uint64_t>(out, s.size());
  out.append(s);
}

}  // namespace

GgufMetaValue GgufMetaValue::scalar_array_body(GgufValueType t, const void* p, size_t n) {
  GgufMetaValue v;
  v.type_ = t;
  append(v.bytes_, p, n);
  return v;
}

GgufMetaValue GgufMetaValue::scalar_array(GgufValueType elem, const void* p, size_t elem_size,
                                          size_t count) {
  GgufMetaValue v;
  v.type_ = GgufValueType::ARRAY;
  append_pod<uint32_t>(v.bytes_, static_cast<uint32_t>(elem));
  append_pod<uint64_t>(v.bytes_, count);
  append(v.bytes_, p, elem_size * count);
  return v;
}

GgufMetaValue GgufMetaValue::string(std::string_view s) {
  GgufMetaValue v;
  v.type_ = GgufValueType::STRING;
  append_string(v.bytes_, s);
  return v;
}

GgufMetaValue GgufMetaValue::array_of_bool(std::span<const bool> b) {
  std::string bytes;
  for (bool x : b) bytes.push_back(x ? 1 : 0);
  return scalar_array(GgufValueType::BOOL, bytes.data(), 1, bytes.size());
}

GgufMetaValue GgufMetaValue::strings(std::span<const std::string> s) {
  GgufMetaValue v;
  v.type_ = GgufValueType::ARRAY;
  append_pod<uint32_t>(v.bytes_, static_cast<uint32_t>(GgufValueType::STRING));
  append_pod<uint64_t>(v.bytes_, s.size());
  for (const std::string& x : s) append_string(v.bytes_, x);
  return v;
}

GgufMetaValue GgufMetaValue::copy_of(const GgufValue& v) {
  if (const auto* s = std::get_if<std::string_view>(&v.value)) return string(*s);
  if (const auto* a = std::get_if<GgufArray>(&v.value)) {
    switch (a->elem_type) {
      case GgufValueType::STRING: {
        GgufMetaValue out;
        out.type_ = GgufValueType::ARRAY;
        append_pod<uint32_t>(out.bytes_, static_cast<uint32_t>(GgufValueType::STRING));
        append_pod<uint64_t>(out.bytes_, a->strings.size());
        for (std::string_view x : a->strings) append_string(out.bytes_, x);
        return out;
      }
      case GgufValueType::ARRAY: {
        std::vector<GgufMetaValue> elems;
        for (const GgufValue& e : a->arrays) elems.push_back(copy_of(e));
        return arrays(elems);
      }
      default:
        return scalar_array(a->elem_type, a->raw.data(), a->count ? a->raw.size() / a->count : 0,
                            a->count);
    }
  }
  // Scalars: re-encode at the width of their original type.
  const auto u = [&]() -> uint64_t {
    if (const auto* x = std::get_if<uint64_t>(&v.value)) return *x;
    if (const auto* x = std::get_if<int64_t>(&v.value)) return static_cast<uint64_t>(*x);
    if (const auto* x = std::get_if<bool>(&v.value)) return *x ? 1 : 0;
    return 0;
  }();
  const double d = std::holds_alternative<double>(v.value) ? std::get<double>(v.value) : 0.0;
  switch (v.type) {
    case GgufValueType::U8:
      return u8(static_cast<uint8_t>(u));
    case GgufValueType::I8:
      return i8(static_cast<int8_t>(u));
    case GgufValueType::U16:
      return u16(static_cast<uint16_t>(u));
    case GgufValueType::I16:
      return i16(static_cast<int16_t>(u));
    case GgufValueType::U32:
      return u32(static_cast<uint32_t>(u));
    case GgufValueType::I32:
      return i32(static_cast<int32_t>(u));
    case GgufValueType::U64:
      return u64(u);
    case GgufValueType::I64:
      return i64(static_cast<int64_t>(u));
    case GgufValueType::F32:
      return f32(static_cast<float>(d));
    case GgufValueType::F64:
      return f64(d);
    case GgufValueType::BOOL:
      return boolean(u != 0);
    default:
      throw EngineError("GgufMetaValue::copy_of: unexpected value type");
  }
}

GgufMetaValue GgufMetaValue::arrays(std::span<const GgufMetaValue> elems) {
  GgufMetaValue v;
  v.type_ = GgufValueType::ARRAY;
  append_pod<uint32_t>(v.bytes_, static_cast<uint32_t>(GgufValueType::ARRAY));
  append_pod<uint64_t>(v.bytes_, elems.size());
  for (const GgufMetaValue& e : elems) {
    if (e.type_ != GgufValueType::ARRAY) {
      throw EngineError("GgufMetaValue::arrays: element of type " +
                        std::string(gguf_value_type_name(e.type_)) + " is not an array");
    }
    v.bytes_ += e.bytes_;
  }
  return v;
}

GgufWriter::GgufWriter(std::string path)
    : path_(std::move(path)), partial_path_(path_ + ".partial") {}

GgufWriter::~GgufWriter() {
  if (state_ != State::kFinished && file_ != nullptr) {
    std::fclose(file_);
    std::remove(partial_path_.c_str());
  }
}

void GgufWriter::fail(const std::string& msg) const {
  throw EngineError(path_ + ": " + msg);
}

void GgufWriter::add(std::string_view key, GgufMetaValue value) {
  if (state_ != State::kDeclaring) fail("metadata key '" + std::string(key) + "' after the header");
  if (key.empty()) fail("empty metadata key");
  if (key.size() > limits_.max_key_bytes) {
    fail("metadata key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
         std::to_string(limits_.max_key_bytes));
  }
  if (keys_.contains(std::string(key))) fail("duplicate metadata key '" + std::string(key) + "'");
  if (key == "general.alignment") {
    // The reader insists on a u32 power of two; refusing here keeps the two in step.
    if (value.type() != GgufValueType::U32) {
      fail("metadata key 'general.alignment' must be u32, not " +
           std::string(gguf_value_type_name(value.type())));
    }
    uint32_t al = 0;
    std::memcpy(&al, value.encoded().data(), sizeof al);
    if (!std::has_single_bit(al) || al > limits_.max_alignment) {
      fail("metadata key 'general.alignment' = " + std::to_string(al) +
           " is not a power of two up to " + std::to_string(limits_.max_alignment));
    }
    alignment_ = al;
  }
  keys_.emplace(key);
  append_string(metadata_, key);
  append_pod<uint32_t>(metadata_, static_cast<uint32_t>(value.type()));
  metadata_ += value.encoded();
  ++n_kv_;
}

void GgufWriter::add_tensor(std::string_view name, std::span<const int64_t> ne, GgmlType type) {
  const std::string tname = "tensor '" + std::string(name) + "'";
  if (state_ != State::kDeclaring) fail(tname + " declared after the header");
  if (name.empty()) fail("empty tensor name");
  if (name.size() > limits_.max_name_bytes) {
    fail(tname + ": name of " + std::to_string(name.size()) + " bytes exceeds the limit of " +
         std::to_string(limits_.max_name_bytes));
  }
  if (ne.empty() || ne.size() > kMaxDims) {
    fail(tname + ": " + std::to_string(ne.size()) + " dimensions, expected 1..4");
  }
  int64_t n = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) {
      fail(tname + ": dimension ne[" + std::to_string(d) + "] = " + std::to_string(ne[d]) +
           " is not positive");
    }
    if (__builtin_mul_overflow(n, ne[d], &n)) fail(tname + ": element count overflows 64 bits");
  }
  const GgmlTypeTraits& tr = ggml_traits(type);
  if (ne[0] % tr.block_elems != 0) {
    fail(tname + ": ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " +
         std::string(tr.name) + " block size " + std::to_string(tr.block_elems));
  }
  GgufWriterTensor t;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n) / tr.block_elems, uint64_t{tr.block_bytes},
                             &t.n_bytes)) {
    fail(tname + ": byte size overflows 64 bits");
  }
  if (!tensor_names_.emplace(name).second) fail("duplicate " + tname);
  t.name = std::string(name);
  t.type = type;
  t.ne.assign(ne.begin(), ne.end());
  tensors_.push_back(std::move(t));
}

void GgufWriter::put(const void* p, size_t n) {
  if (n == 0) return;
  if (std::fwrite(p, 1, n, file_) != n) {
    fail("write failed: " + std::string(std::strerror(errno)));
  }
  written_ += n;
}

void GgufWriter::pad_to_alignment() {
  static constexpr char kZeros[1u << 12] = {};
  uint64_t pad = (alignment_ - written_ % alignment_) % alignment_;
  while (pad > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof kZeros));
    put(kZeros, n);
    pad -= n;
  }
}

void GgufWriter::write_header() {
  if (state_ != State::kDeclaring) fail("header written twice");
  // Offsets: each tensor starts aligned, relative to the (aligned) data section.
  uint64_t off = 0;
  for (GgufWriterTensor& t : tensors_) {
    t.offset = off;
    if (__builtin_add_overflow(off, t.n_bytes, &off)) fail("data section overflows 64 bits");
    off = (off + alignment_ - 1) / alignment_ * alignment_;
  }
  data_size_ = off;

  std::string h;
  append_pod<uint32_t>(h, kMagic);
  append_pod<uint32_t>(h, kVersion);
  append_pod<uint64_t>(h, tensors_.size());
  append_pod<uint64_t>(h, n_kv_);
  h += metadata_;
  for (const GgufWriterTensor& t : tensors_) {
    append_string(h, t.name);
    append_pod<uint32_t>(h, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) append_pod<int64_t>(h, d);
    append_pod<uint32_t>(h, static_cast<uint32_t>(t.type));
    append_pod<uint64_t>(h, t.offset);
  }
  data_offset_ = (h.size() + alignment_ - 1) / alignment_ * alignment_;

  file_ = std::fopen(partial_path_.c_str(), "wb");
  if (file_ == nullptr) {
    fail("cannot create " + partial_path_ + ": " + std::string(std::strerror(errno)));
  }
  std::setvbuf(file_, nullptr, _IOFBF, 1u << 20);
  put(h.data(), h.size());
  pad_to_alignment();
  metadata_.clear();
  metadata_.shrink_to_fit();
  state_ = State::kData;
}

void GgufWriter::begin_tensor(std::string_view name) {
  if (state_ != State::kData) fail("begin_tensor('" + std::string(name) + "') out of order");
  if (next_tensor_ >= tensors_.size()) {
    fail("tensor '" + std::string(name) + "' written but all declared tensors are done");
  }
  if (tensors_[next_tensor_].name != name) {
    fail("tensor '" + std::string(name) + "' written where '" + tensors_[next_tensor_].name +
         "' was declared");
  }
  tensor_written_ = 0;
  state_ = State::kInTensor;
}

// Checks that n more bytes fit the current tensor and counts them.
void GgufWriter::take_tensor_bytes(uint64_t n) {
  if (state_ != State::kInTensor) fail("tensor data written outside begin/end_tensor");
  const GgufWriterTensor& t = tensors_[next_tensor_];
  if (n > t.n_bytes - tensor_written_) {
    fail("tensor '" + t.name + "': " + std::to_string(tensor_written_ + n) +
         " bytes written, its size is " + std::to_string(t.n_bytes));
  }
  tensor_written_ += n;
}

void GgufWriter::write(std::span<const std::byte> bytes) {
  take_tensor_bytes(bytes.size());
  put(bytes.data(), bytes.size());
}

void GgufWriter::write_zeros(uint64_t n) {
  take_tensor_bytes(n);
  if (n == 0) return;
  if (fseeko(file_, static_cast<off_t>(n), SEEK_CUR) != 0) {
    fail("seek failed: " + std::string(std::strerror(errno)));
  }
  written_ += n;
}

void GgufWriter::end_tensor() {
  if (state_ != State::kInTensor) fail("end_tensor without begin_tensor");
  const GgufWriterTensor& t = tensors_[next_tensor_];
  if (tensor_written_ != t.n_bytes) {
    fail("tensor '" + t.name + "': " + std::to_string(tensor_written_) +
         " bytes written, its size is " + std::to_string(t.n_bytes));
  }
  pad_to_alignment();
  ++next_tensor_;
  state_ = State::kData;
}

void GgufWriter::finish() {
  if (state_ == State::kDeclaring) write_header();
  if (state_ != State::kData) fail("finish() while a tensor is being written");
  if (next_tensor_ != tensors_.size()) {
    fail("finish() before tensor '" + tensors_[next_tensor_].name + "' was written");
  }
  // (A hole left by write_zeros() at the end has no bytes yet: the size is set here.)
  const bool flushed =
      std::fflush(file_) == 0 && ftruncate(fileno(file_), static_cast<off_t>(written_)) == 0;
  const int flush_err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    std::remove(partial_path_.c_str());
    state_ = State::kFinished;
    fail("write failed: " + std::string(std::strerror(flushed ? errno : flush_err)));
  }
  if (std::rename(partial_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(partial_path_.c_str());
    state_ = State::kFinished;
    fail("cannot rename " + partial_path_ + ": " + std::strerror(err));
  }
  state_ = State::kFinished;
}

}  // namespace rwkvd::engine
