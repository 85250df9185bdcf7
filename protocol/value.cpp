#include "protocol/value.h"

#include <limits>

#include "protocol/messages.h"

namespace rwkvd::protocol {
namespace {

[[noreturn]] void type_error(std::string_view what, const char* want, Value::Kind got) {
  throw ProtocolError(ErrorCode::kBadType,
                      std::string(what) + ": expected " + want + ", got " + Value::kind_name(got));
}

}  // namespace

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::kNil:
      return "nil";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "negative integer";
    case Kind::kUint:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "string";
    case Kind::kBin:
      return "bin";
    case Kind::kArray:
      return "array";
    case Kind::kMap:
      return "map";
  }
  return "?";
}

bool Value::as_bool(std::string_view what) const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  type_error(what, "bool", kind());
}

int64_t Value::as_int(std::string_view what) const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw ProtocolError(ErrorCode::kBadValue, std::string(what) + ": integer out of range");
    }
    return static_cast<int64_t>(*u);
  }
  type_error(what, "integer", kind());
}

uint64_t Value::as_uint(std::string_view what) const {
  if (auto* u = std::get_if<uint64_t>(&v_)) return *u;
  if (std::holds_alternative<int64_t>(v_)) {
    throw ProtocolError(ErrorCode::kBadValue, std::string(what) + ": must not be negative");
  }
  type_error(what, "non-negative integer", kind());
}

double Value::as_double(std::string_view what) const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (auto* u = std::get_if<uint64_t>(&v_)) return static_cast<double>(*u);
  type_error(what, "number", kind());
}

const std::string& Value::as_str(std::string_view what) const {
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  type_error(what, "string", kind());
}

const std::string& Value::as_bin(std::string_view what) const {
  if (auto* b = std::get_if<Bin>(&v_)) return b->bytes;
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  type_error(what, "bin", kind());
}

const Value::Array& Value::as_array(std::string_view what) const {
  if (auto* a = std::get_if<Array>(&v_)) return *a;
  type_error(what, "array", kind());
}

const Value::Map& Value::as_map(std::string_view what) const {
  if (auto* m = std::get_if<Map>(&v_)) return *m;
  type_error(what, "map", kind());
}

const Value* Value::find(std::string_view key) const {
  auto* m = std::get_if<Map>(&v_);
  if (m == nullptr) return nullptr;
  for (const auto& [k, v] : *m) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::set(std::string key, Value value) {
  if (!std::holds_alternative<Map>(v_)) v_ = Map{};
  auto& m = std::get<Map>(v_);
  for (auto& [k, v] : m) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  m.emplace_back(std::move(key), std::move(value));
}

}  // namespace rwkvd::protocol
