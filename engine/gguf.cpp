#include "engine/gguf.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "engine/error.h"

namespace rwkvd::engine {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();
// Reservations driven by counts from the file are capped: a lying count must fail on the
// truncation it causes, not on an allocation sized by it.
constexpr uint64_t kMaxReserve = 1u << 16;

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      return 0;
  }
  return 0;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

// Bounds-checked little-endian reader over the mapping. Every failure names the file and what
// was being read.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw EngineError(path_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " +
                      std::to_string(bytes_.size()) + ")");
  }

  std::span<const std::byte> take(uint64_t n, const std::string& what) {
    if (n > remaining()) {
      fail("truncated file: " + what + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(remaining()) + " left");
    }
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  template <typename T>
  T read(const std::string& what) {
    static_assert(std::endian::native == std::endian::little, "rwkvd assumes a little-endian host");
    T v;
    std::memcpy(&v, take(sizeof(T), what).data(), sizeof(T));
    return v;
  }

  // A string of at most `max_len` bytes (a limit of the format, not of the file: a length past
  // the end of the file is reported as truncation).
  std::string_view read_string(uint64_t max_len, const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " length");
    if (len > max_len) {
      fail(what + " length " + std::to_string(len) + " exceeds the limit of " +
           std::to_string(max_len) + " bytes");
    }
    auto s = take(len, what);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

GgufValue read_scalar(Cursor& c, GgufValueType t, const std::string& what) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufValueType::U8: v.value = uint64_t{c.read<uint8_t>(what)}; break;
    case GgufValueType::I8: v.value = int64_t{c.read<int8_t>(what)}; break;
    case GgufValueType::U16: v.value = uint64_t{c.read<uint16_t>(what)}; break;
    case GgufValueType::I16: v.value = int64_t{c.read<int16_t>(what)}; break;
    case GgufValueType::U32: v.value = uint64_t{c.read<uint32_t>(what)}; break;
    case GgufValueType::I32: v.value = int64_t{c.read<int32_t>(what)}; break;
    case GgufValueType::U64: v.value = c.read<uint64_t>(what); break;
    case GgufValueType::I64: v.value = c.read<int64_t>(what); break;
    case GgufValueType::F32: v.value = double{c.read<float>(what)}; break;
    case GgufValueType::F64: v.value = c.read<double>(what); break;
    case GgufValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.value = b == 1;
      break;
    }
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      c.fail("internal: read_scalar on a non-scalar type");
  }
  return v;
}

GgufValue read_value(Cursor& c, uint32_t raw_type, const std::string& what,
                     const GgufLimits& limits, uint32_t depth);

GgufArray read_array(Cursor& c, const std::string& what, const GgufLimits& limits,
                     uint32_t depth) {
  if (depth >= limits.max_array_depth) {
    c.fail(what + ": arrays nested deeper than " + std::to_string(limits.max_array_depth));
  }
  GgufArray a;
  const uint32_t raw_elem = c.read<uint32_t>(what + " element type");
  if (!valid_value_type(raw_elem)) {
    c.fail(what + ": unknown array element type " + std::to_string(raw_elem));
  }
  a.elem_type = static_cast<GgufValueType>(raw_elem);
  a.count = c.read<uint64_t>(what + " element count");
  // Every element takes at least one byte (a string 8, an array 12), so a count larger than
  // what is left in the file is malformed; checking before allocating caps memory use.
  const size_t elem = scalar_size(a.elem_type);
  const uint64_t min_elem_bytes =
      elem != 0 ? elem : (a.elem_type == GgufValueType::STRING ? 8 : 12);
  if (a.count > c.remaining() / min_elem_bytes) {
    c.fail("truncated file or bad count: " + what + ": array of " + std::to_string(a.count) +
           " elements cannot fit in the " + std::to_string(c.remaining()) + " bytes left");
  }
  if (elem != 0) {
    a.raw = c.take(a.count * elem, what + " elements");
    if (a.elem_type == GgufValueType::BOOL) {
      for (std::byte b : a.raw) {
        if (std::to_integer<uint8_t>(b) > 1) c.fail(what + ": bool element is neither 0 nor 1");
      }
    }
  } else if (a.elem_type == GgufValueType::STRING) {
    a.strings.reserve(std::min(a.count, kMaxReserve));
    for (uint64_t i = 0; i < a.count; ++i) {
      a.strings.push_back(c.read_string(kNoLimit, what + "[" + std::to_string(i) + "]"));
    }
  } else {
    a.arrays.reserve(std::min(a.count, kMaxReserve));
    for (uint64_t i = 0; i < a.count; ++i) {
      a.arrays.push_back(read_value(c, static_cast<uint32_t>(GgufValueType::ARRAY),
                                    what + "[" + std::to_string(i) + "]", limits, depth + 1));
    }
  }
  return a;
}

GgufValue read_value(Cursor& c, uint32_t raw_type, const std::string& what,
                     const GgufLimits& limits, uint32_t depth) {
  if (!valid_value_type(raw_type)) c.fail(what + ": unknown value type " + std::to_string(raw_type));
  const auto t = static_cast<GgufValueType>(raw_type);
  if (t == GgufValueType::STRING) {
    GgufValue v;
    v.type = t;
    v.value = c.read_string(kNoLimit, what);
    return v;
  }
  if (t == GgufValueType::ARRAY) {
    GgufValue v;
    v.type = t;
    v.value = read_array(c, what, limits, depth);
    return v;
  }
  return read_scalar(c, t, what);
}

[[noreturn]] void key_error(const std::string& path, std::string_view key, const std::string& msg) {
  throw EngineError(path + ": metadata key '" + std::string(key) + "': " + msg);
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
  }
  return "?";
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, const GgufLimits& limits) {
  std::unique_ptr<GgufFile> f(new GgufFile(MappedFile(path)));
  f->parse(limits);
  return f;
}

void GgufFile::parse(const GgufLimits& limits) {
  const std::string& p = file_.path();
  Cursor c(file_.bytes(), p);
  if (file_.size() < 4) c.fail("not a GGUF file: too short to hold the magic");
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) {
    char found[16];
    std::snprintf(found, sizeof found, "0x%08x", magic);
    c.fail(std::string("not a GGUF file: bad magic ") + found + ", expected \"GGUF\"");
  }
  version_ = c.read<uint32_t>("version");
  if (version_ == 0 || version_ == 1) {
    c.fail("GGUF version " + std::to_string(version_) + " is not supported (v2 and v3 are)");
  }
  if (version_ > 3) {
    // A big-endian GGUF reads as version 0x0N000000 here.
    const bool swapped = (version_ & 0x00ffffffu) == 0;
    c.fail("GGUF version " + std::to_string(version_) + " is not supported (v2 and v3 are)" +
           (swapped ? "; is it a big-endian file?" : ""));
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > limits.max_tensors) {
    c.fail("tensor count " + std::to_string(n_tensors) + " exceeds the limit of " +
           std::to_string(limits.max_tensors));
  }
  if (n_kv > limits.max_kv) {
    c.fail("metadata count " + std::to_string(n_kv) + " exceeds the limit of " +
           std::to_string(limits.max_kv));
  }

  kv_.reserve(std::min<uint64_t>(n_kv, c.remaining() / 16));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string idx = "metadata #" + std::to_string(i);
    const std::string_view key = c.read_string(limits.max_key_bytes, idx + " key");
    if (key.empty()) c.fail(idx + ": empty key");
    if (kv_index_.contains(key)) c.fail("duplicate metadata key '" + std::string(key) + "'");
    const uint32_t raw_type = c.read<uint32_t>("type of key '" + std::string(key) + "'");
    GgufValue v = read_value(c, raw_type, "key '" + std::string(key) + "'", limits, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(key, std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValueType::U32) {
      key_error(p, "general.alignment",
                "must be u32, found " + std::string(gguf_value_type_name(a->type)));
    }
    const uint64_t al = std::get<uint64_t>(a->value);
    if (al == 0 || !std::has_single_bit(al)) {
      key_error(p, "general.alignment", std::to_string(al) + " is not a power of two");
    }
    if (al > limits.max_alignment) {
      key_error(p, "general.alignment", std::to_string(al) + " exceeds the limit of " +
                                            std::to_string(limits.max_alignment));
    }
    alignment_ = static_cast<uint32_t>(al);
  }

  tensors_.reserve(std::min<uint64_t>(n_tensors, c.remaining() / 24));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    const std::string idx = "tensor #" + std::to_string(i);
    t.name = c.read_string(kNoLimit, idx + " name");
    const std::string tname = "tensor '" + std::string(t.name) + "'";
    if (t.name.empty()) c.fail(idx + ": empty name");
    if (t.name.size() > limits.max_name_bytes) {
      c.fail(idx + " '" + std::string(t.name.substr(0, 80)) + (t.name.size() > 80 ? "...'" : "'") +
             ": name of " + std::to_string(t.name.size()) + " bytes exceeds the limit of " +
             std::to_string(limits.max_name_bytes));
    }
    if (tensor_index_.contains(t.name)) c.fail("duplicate " + tname);
    t.n_dims = c.read<uint32_t>(tname + " n_dims");
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      c.fail(tname + ": n_dims " + std::to_string(t.n_dims) + " is not in 1..4");
    }
    int64_t n_elems = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const int64_t ne = c.read<int64_t>(tname + " ne[" + std::to_string(d) + "]");
      if (ne <= 0) {
        c.fail(tname + ": dimension ne[" + std::to_string(d) + "] = " + std::to_string(ne) +
               " is not positive");
      }
      if (__builtin_mul_overflow(n_elems, ne, &n_elems)) {
        c.fail(tname + ": element count overflows 64 bits");
      }
      t.ne[d] = ne;
    }
    const uint32_t raw_type = c.read<uint32_t>(tname + " type");
    const auto traits = ggml_type_traits(raw_type);
    if (!traits) {
      c.fail("unsupported type " + ggml_type_name(raw_type) + " in " + tname);
    }
    t.type = traits->type;
    if (t.ne[0] % traits->block_elems != 0) {
      c.fail(tname + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " +
             std::string(traits->name) + " block size " + std::to_string(traits->block_elems));
    }
    const uint64_t blocks = static_cast<uint64_t>(n_elems) / traits->block_elems;
    if (__builtin_mul_overflow(blocks, uint64_t{traits->block_bytes}, &t.n_bytes)) {
      c.fail(tname + ": byte size overflows 64 bits");
    }
    t.offset = c.read<uint64_t>(tname + " offset");  // relative until the data start is known
    if (t.offset % alignment_ != 0) {
      c.fail(tname + ": offset " + std::to_string(t.offset) + " is not a multiple of alignment " +
             std::to_string(alignment_));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(t);
  }

  // The data section starts at the next multiple of the alignment after the header.
  const uint64_t header_end = c.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset_ > file_.size()) {
    c.fail("truncated file: the data section would start past the end");
  }
  const uint64_t data_size = tensors_.empty() ? 0 : file_.size() - data_offset_;

  // Bounds and overlap, on tensors sorted by offset (quantizers write them in any order).
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  uint64_t prev_end = 0;
  std::string_view prev_name;
  for (size_t i : order) {
    GgufTensor& t = tensors_[i];
    const std::string tname = "tensor '" + std::string(t.name) + "'";
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      throw EngineError(p + ": truncated file or bad offset: " + tname + " spans data bytes [" +
                        std::to_string(t.offset) + ", " + std::to_string(t.offset) + "+" +
                        std::to_string(t.n_bytes) + ") but the data section has " +
                        std::to_string(data_size) + " bytes");
    }
    if (t.offset < prev_end) {
      throw EngineError(p + ": " + tname + " overlaps tensor '" + std::string(prev_name) + "'");
    }
    prev_end = t.offset + t.n_bytes;
    prev_name = t.name;
    t.offset += data_offset_;
    t.data = file_.bytes().subspan(t.offset, t.n_bytes);
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {
const GgufValue& require(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) key_error(f.path(), key, "missing");
  return *v;
}
}  // namespace

uint64_t GgufFile::get_u64(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return *u;
  if (const auto* s = std::get_if<int64_t>(&v.value)) {
    if (*s < 0) key_error(path(), key, "must not be negative, found " + std::to_string(*s));
    return static_cast<uint64_t>(*s);
  }
  key_error(path(), key,
            "must be an integer, found " + std::string(gguf_value_type_name(v.type)));
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  const uint64_t v = get_u64(key);
  if (v > std::numeric_limits<uint32_t>::max()) {
    key_error(path(), key, "value " + std::to_string(v) + " does not fit in 32 bits");
  }
  return static_cast<uint32_t>(v);
}

float GgufFile::get_f32(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (const auto* d = std::get_if<double>(&v.value)) return static_cast<float>(*d);
  key_error(path(), key, "must be a float, found " + std::string(gguf_value_type_name(v.type)));
}

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (const auto* s = std::get_if<std::string_view>(&v.value)) return *s;
  key_error(path(), key, "must be a string, found " + std::string(gguf_value_type_name(v.type)));
}

const GgufArray& GgufFile::get_array(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (const auto* a = std::get_if<GgufArray>(&v.value)) return *a;
  key_error(path(), key, "must be an array, found " + std::string(gguf_value_type_name(v.type)));
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) throw EngineError(path() + ": missing tensor '" + std::string(name) + "'");
  return *t;
}

std::string gguf_value_to_string(const GgufValue& v, size_t max_elems) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string_view>) {
          os << '"' << (x.size() > 80 ? std::string(x.substr(0, 77)) + "..." : std::string(x))
             << '"';
        } else if constexpr (std::is_same_v<T, bool>) {
          os << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          os << "[" << gguf_value_type_name(x.elem_type) << " x " << x.count << "]";
          if (x.elem_type == GgufValueType::STRING) {
            os << " {";
            for (size_t i = 0; i < std::min<size_t>(max_elems, x.strings.size()); ++i) {
              os << (i ? ", " : "") << '"' << x.strings[i] << '"';
            }
            os << (x.strings.size() > max_elems ? ", ...}" : "}");
          }
        } else {
          os << x;
        }
      },
      v.value);
  return os.str();
}

}  // namespace rwkvd::engine
