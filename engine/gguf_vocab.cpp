#include "engine/gguf_vocab.h"

#include <cstdio>
#include <cstring>

#include "engine/error.h"
#include "engine/gguf.h"

namespace rwkvd::engine {
namespace {

// llama.cpp reads `\x` digits assuming lowercase and would silently turn `\xAB` into some other
// byte; rejecting what it cannot read is safer than guessing.
int lower_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
      return true;
    default:
      return false;
  }
}

// Element i of an integer array; llama.cpp writes i32, but any integer type reads the same.
int64_t integer_at(const GgufArray& a, size_t i) {
  const std::byte* p = a.raw.data();
  auto load = [&](auto v) {
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return static_cast<int64_t>(v);
  };
  switch (a.elem_type) {
    case GgufValueType::U8:
      return load(uint8_t{});
    case GgufValueType::I8:
      return load(int8_t{});
    case GgufValueType::U16:
      return load(uint16_t{});
    case GgufValueType::I16:
      return load(int16_t{});
    case GgufValueType::U32:
      return load(uint32_t{});
    case GgufValueType::I32:
      return load(int32_t{});
    case GgufValueType::U64:
      return load(uint64_t{});  // values past INT64_MAX are not types
    case GgufValueType::I64:
      return load(int64_t{});
    default:
      return 0;
  }
}

// The C-escaped form of a token string for error messages.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7F && c != '"') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    }
  }
  return s.size() > 64 ? out + "..." : out;
}

}  // namespace

std::string escape_gguf_token(std::string_view bytes) {
  const bool double_quoted =
      bytes.find('\'') != std::string_view::npos && bytes.find('"') == std::string_view::npos;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\'' && !double_quoted) {
      out += "\\'";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else {
      out += ch;
    }
  }
  return out;
}

std::string unescape_gguf_token(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    const char c = escaped[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == escaped.size()) throw EngineError("backslash at the end of the token string");
    switch (const char e = escaped[i]) {
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 'x': {
        const int hi = i + 1 < escaped.size() ? lower_hex_value(escaped[i + 1]) : -1;
        const int lo = i + 2 < escaped.size() ? lower_hex_value(escaped[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
          throw EngineError("\\x must be followed by two lowercase hex digits");
        }
        out += static_cast<char>(hi << 4 | lo);
        i += 2;
        break;
      }
      default:
        out += e;
        break;  // `\\` and `\'` (and any other `\c`) stand for the character
    }
  }
  return out;
}

std::vector<std::string> read_gguf_vocab(const GgufFile& file) {
  const std::string& path = file.path();
  if (file.has("tokenizer.ggml.model")) {
    const std::string_view name = file.get_string("tokenizer.ggml.model");
    if (name != "rwkv") {
      throw EngineError(path + ": tokenizer.ggml.model is '" + std::string(name) +
                        "'; only 'rwkv' (the world tokenizer) is supported");
    }
  }
  const GgufArray& tokens = file.get_array("tokenizer.ggml.tokens");
  if (tokens.elem_type != GgufValueType::STRING) {
    const std::string found(gguf_value_type_name(tokens.elem_type));
    throw EngineError(path + ": tokenizer.ggml.tokens must be an array of strings, found an " +
                      "array of " + found);
  }
  if (tokens.count == 0) throw EngineError(path + ": tokenizer.ggml.tokens is empty (no vocab)");

  const GgufArray* types = nullptr;
  if (file.has("tokenizer.ggml.token_type")) {
    types = &file.get_array("tokenizer.ggml.token_type");
    if (!is_integer_type(types->elem_type)) {
      const std::string found(gguf_value_type_name(types->elem_type));
      throw EngineError(path + ": tokenizer.ggml.token_type must be an array of integers, " +
                        "found an array of " + found);
    }
    if (types->count != tokens.count) {
      throw EngineError(path + ": tokenizer.ggml.token_type has " + std::to_string(types->count) +
                        " entries but tokenizer.ggml.tokens has " + std::to_string(tokens.count));
    }
  }

  std::vector<std::string> out(tokens.strings.size());
  for (size_t id = 0; id < out.size(); ++id) {
    if (types != nullptr) {
      const int64_t t = integer_at(*types, id);
      // `<s>` (id 0) and the padding ids carry display text only; matching them would turn the
      // literal text "<s>" into the end-of-text id, which no reference tokenizer does.
      if (t == static_cast<int64_t>(GgufTokenType::CONTROL) ||
          t == static_cast<int64_t>(GgufTokenType::UNUSED)) {
        continue;
      }
    }
    try {
      out[id] = unescape_gguf_token(tokens.strings[id]);
    } catch (const EngineError& e) {
      throw EngineError(path + ": tokenizer.ggml.tokens[" + std::to_string(id) + "] \"" +
                        printable(tokens.strings[id]) + "\": " + e.what());
    }
  }
  return out;
}

}  // namespace rwkvd::engine
