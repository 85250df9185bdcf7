#pragma once
// A decoded msgpack value as a plain C++ tree. The wire format is msgpack (codec.h); everything
// above the codec reads and builds Values, so only one file of ours includes msgpack headers.
// Integers keep msgpack's split: non-negative ones are stored as uint64, negative ones as int64.
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rwkvd::protocol {

class Value {
 public:
  using Array = std::vector<Value>;
  using Map = std::vector<std::pair<std::string, Value>>;  // in wire order; keys are unique
  struct Bin {
    std::string bytes;  // raw bytes (std::string as a byte container)
  };
  enum class Kind { kNil, kBool, kInt, kUint, kFloat, kStr, kBin, kArray, kMap };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Value(T i) {
    if constexpr (std::is_signed_v<T>) {
      if (i < 0) {
        v_ = static_cast<int64_t>(i);
        return;
      }
    }
    v_ = static_cast<uint64_t>(i);
  }
  Value(double d) : v_(d) {}
  Value(float f) : v_(static_cast<double>(f)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Bin b) : v_(std::move(b)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Map m) : v_(std::move(m)) {}

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_nil() const { return kind() == Kind::kNil; }
  bool is_int() const { return kind() == Kind::kInt || kind() == Kind::kUint; }
  bool is_number() const { return is_int() || kind() == Kind::kFloat; }

  // Typed access; each throws ProtocolError(kBadType) naming `what` on a mismatch.
  bool as_bool(std::string_view what = "value") const;
  int64_t as_int(std::string_view what = "value") const;    // any integer that fits int64
  uint64_t as_uint(std::string_view what = "value") const;  // a non-negative integer
  double as_double(std::string_view what = "value") const;  // any number
  const std::string& as_str(std::string_view what = "value") const;
  const std::string& as_bin(std::string_view what = "value") const;  // bin (or str) bytes
  const Array& as_array(std::string_view what = "value") const;
  const Map& as_map(std::string_view what = "value") const;
  Array& as_array_mut() { return std::get<Array>(v_); }
  Map& as_map_mut() { return std::get<Map>(v_); }

  // Map lookup; nullptr when this is not a map or the key is absent.
  const Value* find(std::string_view key) const;
  // Appends (or replaces) a key of a map value.
  void set(std::string key, Value value);

  static const char* kind_name(Kind k);

 private:
  std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string, Bin, Array, Map> v_;
};

}  // namespace rwkvd::protocol
