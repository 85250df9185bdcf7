#include "engine/vocab_file.h"

#include <charconv>
#include <cstdio>

#include "engine/error.h"
#include "engine/mapped_file.h"
#include "engine/utf8.h"

namespace rwkvd::engine {
namespace {

// Ids come from the file; without a bound a single bad line could ask for gigabytes.
constexpr uint32_t kMaxId = (1u << 24) - 1;

[[noreturn]] void bad(const std::string& msg) {
  throw EngineError(msg);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `n` hex digits at body[i..]; Python accepts either case.
uint32_t read_hex(std::string_view body, size_t i, size_t n, char esc) {
  if (i + n > body.size()) bad(std::string("truncated \\") + esc + " escape");
  uint32_t v = 0;
  for (size_t k = 0; k < n; ++k) {
    const int h = hex_value(body[i + k]);
    if (h < 0) bad(std::string("bad hex digit in \\") + esc + " escape");
    v = v << 4 | static_cast<uint32_t>(h);
  }
  return v;
}

std::string code_point_name(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) {
    bad("surrogate code point " + code_point_name(cp) + " has no UTF-8 encoding");
  }
  if (cp > 0x10FFFF) bad("code point " + code_point_name(cp) + " is beyond U+10FFFF");
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The one-character escapes Python's repr() writes; -1 for anything else.
int simple_escape(char e) {
  switch (e) {
    case '\\':
    case '\'':
    case '"':
      return e;
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    default:
      return -1;
  }
}

bool parse_decimal(std::string_view s, uint32_t& v) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc{};
}

}  // namespace

std::string decode_python_literal(std::string_view literal) {
  const bool is_bytes = !literal.empty() && literal[0] == 'b';
  std::string_view q = is_bytes ? literal.substr(1) : literal;
  if (q.size() < 2 || (q[0] != '\'' && q[0] != '"') || q.back() != q[0]) {
    bad("not a quoted Python str or bytes literal");
  }
  const char quote = q[0];
  const std::string_view body = q.substr(1, q.size() - 2);
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == quote) bad("unescaped quote inside the literal");
    if (c != '\\') {
      if (static_cast<uint8_t>(c) < 0x80) {
        out += c;
        ++i;
        continue;
      }
      if (is_bytes) bad("non-ASCII character in a bytes literal");
      // Every reference reads the file as UTF-8, so raw text in a str literal must be valid.
      const size_t n = utf8_sequence_length(body, i);
      if (n == 0) bad("invalid UTF-8 in the literal");
      out.append(body.substr(i, n));
      i += n;
      continue;
    }
    if (i + 1 >= body.size()) bad("backslash at the end of the literal");
    const char e = body[i + 1];
    i += 2;
    if (const int simple = simple_escape(e); simple >= 0) {
      out += static_cast<char>(simple);
      continue;
    }
    switch (e) {
      case 'x': {
        // In bytes \xNN is one byte; in str it is the code point U+00NN (2 bytes from 0x80).
        const uint32_t v = read_hex(body, i, 2, e);
        i += 2;
        if (is_bytes) {
          out += static_cast<char>(v);
        } else {
          append_utf8(out, v);
        }
        break;
      }
      case 'u':
      case 'U': {
        if (is_bytes) bad(std::string("\\") + e + " escape in a bytes literal");
        const size_t n = e == 'u' ? 4 : 8;
        append_utf8(out, read_hex(body, i, n, e));
        i += n;
        break;
      }
      default:
        bad(std::string("unsupported escape \\") + e);
    }
  }
  return out;
}

std::vector<std::string> parse_vocab_text(std::string_view text, const std::string& source) {
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  size_t line_no = 0, entries = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // tolerate CRLF copies
    if (line.empty()) continue;
    try {
      // A literal may contain spaces (token 33 is ' '), so only the first and last split.
      const size_t first = line.find(' ');
      const size_t last = line.rfind(' ');
      if (first == std::string_view::npos || first == last) {
        bad("expected `<id> <literal> <length>`");
      }
      uint32_t id = 0, length = 0;
      if (!parse_decimal(line.substr(0, first), id)) bad("the id is not a decimal number");
      if (id > kMaxId) bad("id " + std::to_string(id) + " is too large");
      if (!parse_decimal(line.substr(last + 1), length)) {
        bad("the length field is not a decimal number");
      }
      std::string bytes = decode_python_literal(line.substr(first + 1, last - first - 1));
      if (bytes.size() != length) {
        bad("length field says " + std::to_string(length) + " bytes but the literal is " +
            std::to_string(bytes.size()));
      }
      if (bytes.empty()) bad("empty token");
      if (id >= tokens.size()) {
        tokens.resize(id + 1);
        seen.resize(id + 1);
      }
      if (seen[id]) bad("id " + std::to_string(id) + " appears twice");
      seen[id] = true;
      tokens[id] = std::move(bytes);
      ++entries;
    } catch (const EngineError& e) {
      throw EngineError(source + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  if (entries == 0) throw EngineError(source + ": empty vocab (no token lines)");
  return tokens;
}

std::vector<std::string> read_vocab_file(const std::string& path) {
  const MappedFile file(path);
  const auto bytes = file.bytes();
  return parse_vocab_text({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, path);
}

}  // namespace rwkvd::engine
