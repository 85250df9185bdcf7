// The only file that includes msgpack-c: everything else sees Values.
#include "protocol/codec.h"

#include <msgpack.hpp>
#include <optional>
#include <string_view>

#include "protocol/messages.h"

namespace rwkvd::protocol {
namespace {

// msgpack-c's packer writes to anything with write(); appending to a std::string saves the copy
// out of an sbuffer.
struct StringWriter {
  std::string* out;
  void write(const char* p, size_t n) { out->append(p, n); }
};

void pack(msgpack::packer<StringWriter>& pk, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNil:
      pk.pack_nil();
      break;
    case Value::Kind::kBool:
      v.as_bool() ? pk.pack_true() : pk.pack_false();
      break;
    case Value::Kind::kInt:
      pk.pack_int64(v.as_int());
      break;
    case Value::Kind::kUint:
      pk.pack_uint64(v.as_uint());
      break;
    case Value::Kind::kFloat:
      pk.pack_double(v.as_double());
      break;
    case Value::Kind::kStr: {
      const auto& s = v.as_str();
      pk.pack_str(static_cast<uint32_t>(s.size()));
      pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
      break;
    }
    case Value::Kind::kBin: {
      const auto& b = v.as_bin();
      pk.pack_bin(static_cast<uint32_t>(b.size()));
      pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
      break;
    }
    case Value::Kind::kArray: {
      const auto& a = v.as_array();
      pk.pack_array(static_cast<uint32_t>(a.size()));
      for (const auto& e : a) pack(pk, e);
      break;
    }
    case Value::Kind::kMap: {
      const auto& m = v.as_map();
      pk.pack_map(static_cast<uint32_t>(m.size()));
      for (const auto& [k, e] : m) {
        pk.pack_str(static_cast<uint32_t>(k.size()));
        pk.pack_str_body(k.data(), static_cast<uint32_t>(k.size()));
        pack(pk, e);
      }
      break;
    }
  }
}

Value convert(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return Value();
    case msgpack::type::BOOLEAN:
      return Value(o.via.boolean);
    case msgpack::type::POSITIVE_INTEGER:
      return Value(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER:
      return Value(o.via.i64);
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return Value(o.via.f64);
    case msgpack::type::STR:
      return Value(std::string(o.via.str.ptr, o.via.str.size));
    case msgpack::type::BIN:
      return Value(Value::Bin{std::string(o.via.bin.ptr, o.via.bin.size)});
    case msgpack::type::ARRAY: {
      Value::Array a;
      a.reserve(o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(convert(o.via.array.ptr[i]));
      return Value(std::move(a));
    }
    case msgpack::type::MAP: {
      Value::Map m;
      m.reserve(o.via.map.size);
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const auto& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) {
          throw ProtocolError(ErrorCode::kBadMessage, "map keys must be strings");
        }
        std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
        for (const auto& [k, unused] : m) {
          if (k == key)
            throw ProtocolError(ErrorCode::kBadMessage, "duplicate map key '" + key + "'");
        }
        m.emplace_back(std::move(key), convert(kv.val));
      }
      return Value(std::move(m));
    }
    case msgpack::type::EXT:
      break;
  }
  throw ProtocolError(ErrorCode::kBadMessage, "msgpack extension types are not used");
}

}  // namespace

void encode_to(const Value& v, std::string& out) {
  StringWriter w{&out};
  msgpack::packer<StringWriter> pk(w);
  pack(pk, v);
}

std::string encode(const Value& v) {
  std::string out;
  encode_to(v, out);
  return out;
}

namespace {

// Follows the parse to the top-level map's "id" and stops there (a false return ends it).
struct IdFinder : msgpack::v2::null_visitor {
  static constexpr int kMaxDepth = 64;
  int depth = 0;
  bool at_key = false, key_is_id = false;
  std::optional<uint64_t> id;
  bool start_map(uint32_t) { return ++depth <= kMaxDepth; }
  bool end_map() { return --depth, true; }
  bool start_array(uint32_t) { return ++depth <= kMaxDepth; }
  bool end_array() { return --depth, true; }
  bool start_map_key() { return at_key = depth == 1, true; }
  bool end_map_key() { return at_key = false, true; }
  bool visit_str(const char* v, uint32_t size) {
    if (at_key) key_is_id = std::string_view(v, size) == "id";
    return true;
  }
  bool visit_positive_integer(uint64_t v) {
    if (depth == 1 && !at_key && key_is_id) id = v;
    return !id.has_value();
  }
  bool end_map_value() { return key_is_id = depth == 1 ? false : key_is_id, true; }
};

}  // namespace

uint64_t peek_id(std::string_view bytes) {
  IdFinder f;
  size_t off = 0;
  try {
    (void)msgpack::v2::parse(bytes.data(), bytes.size(), off, f);
  } catch (const std::exception&) {  // what it had found by then stands
  }
  return f.id.value_or(0);
}

Value decode(std::string_view bytes, const DecodeLimits& limits) {
  if (bytes.size() > limits.max_bytes) {
    throw ProtocolError(ErrorCode::kTooLarge, "message of " + std::to_string(bytes.size()) +
                                                  " bytes exceeds the limit of " +
                                                  std::to_string(limits.max_bytes));
  }
  if (bytes.empty()) throw ProtocolError(ErrorCode::kBadMessage, "empty message");
  const msgpack::unpack_limit lim(limits.max_array, limits.max_map, limits.max_str, limits.max_bin,
                                  0, limits.max_depth);
  // Strings and bins reference the input instead of being copied into msgpack's zone; convert()
  // copies them once into the Value while `bytes` is still alive.
  auto reference_all = [](msgpack::type::object_type, std::size_t, void*) { return true; };
  std::size_t off = 0;
  msgpack::object_handle oh;
  try {
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, reference_all, nullptr, lim);
  } catch (const msgpack::ext_size_overflow&) {
    throw ProtocolError(ErrorCode::kBadMessage, "msgpack extension types are not used");
  } catch (const msgpack::depth_size_overflow&) {
    throw ProtocolError(ErrorCode::kTooLarge, "message nests too deeply");
  } catch (const msgpack::size_overflow& e) {
    throw ProtocolError(ErrorCode::kTooLarge,
                        std::string("message exceeds a size limit: ") + e.what());
  } catch (const std::exception& e) {
    throw ProtocolError(ErrorCode::kBadMessage, std::string("not valid msgpack: ") + e.what());
  }
  if (off != bytes.size()) {
    throw ProtocolError(ErrorCode::kBadMessage, "trailing bytes after the msgpack value");
  }
  return convert(oh.get());
}

}  // namespace rwkvd::protocol
