#include "tools/synth/vocab.h"

#include <fstream>

#include "engine/error.h"

namespace rwkvd::tools::synth {
namespace {

using engine::EngineError;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes one Python str or bytes literal (the vocab file's middle field) to its bytes: str
// literals are UTF-8 encoded, as the converter does with token.encode("utf-8").
std::string decode_python_literal(std::string_view lit, const std::string& where) {
  auto bad = [&](const std::string& why) -> EngineError {
    return EngineError(where + ": " + why + " in literal " + std::string(lit));
  };
  const bool is_bytes = !lit.empty() && lit[0] == 'b';
  if (is_bytes) lit.remove_prefix(1);
  if (lit.size() < 2 || (lit[0] != '\'' && lit[0] != '"') || lit.back() != lit[0]) {
    throw bad("not a quoted Python literal");
  }
  const std::string_view body = lit.substr(1, lit.size() - 2);
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\') {
      if (is_bytes && static_cast<unsigned char>(c) >= 0x80) throw bad("non-ASCII byte");
      out += c;
      continue;
    }
    if (++i == body.size()) throw bad("dangling backslash");
    auto hex = [&](size_t n) {
      if (i + n >= body.size()) throw bad("short \\x/\\u escape");
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        const int d = hex_digit(body[i + k]);
        if (d < 0) throw bad("bad hex digit");
        v = v * 16 + static_cast<uint32_t>(d);
      }
      i += n;
      return v;
    };
    switch (body[i]) {
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x': {
        const uint32_t v = hex(2);
        if (is_bytes) {
          out += static_cast<char>(v);
        } else {
          append_utf8(out, v);
        }
        break;
      }
      case 'u':
      case 'U': {
        if (is_bytes) throw bad("\\u in a bytes literal");
        append_utf8(out, hex(body[i] == 'u' ? 4 : 8));
        break;
      }
      default:
        throw bad(std::string("unsupported escape \\") + body[i]);
    }
  }
  return out;
}

}  // namespace

std::string escape_token(std::string_view bytes) {
  const bool has_single = bytes.find('\'') != std::string_view::npos;
  const bool has_double = bytes.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\' || c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += ch;
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::vector<std::string> read_world_vocab(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EngineError(path + ": cannot open the vocab file");
  std::vector<std::string> tokens;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    // "<id> <literal> <length>": the literal may itself hold spaces, so split at the first
    // and the last space.
    const size_t a = line.find(' '), b = line.rfind(' ');
    if (a == std::string::npos || b <= a)
      throw EngineError(where + ": expected '<id> <literal> <length>'");
    const std::string id = line.substr(0, a), len = line.substr(b + 1);
    if (id != std::to_string(tokens.size() + 1)) {
      throw EngineError(where + ": id " + id + ", expected " + std::to_string(tokens.size() + 1));
    }
    std::string bytes =
        decode_python_literal(std::string_view(line).substr(a + 1, b - a - 1), where);
    if (len != std::to_string(bytes.size())) {
      throw EngineError(where + ": token of " + std::to_string(bytes.size()) +
                        " bytes, the line says " + len);
    }
    tokens.push_back(std::move(bytes));
  }
  if (tokens.empty()) throw EngineError(path + ": no tokens in the vocab file");
  return tokens;
}

std::vector<std::string> generated_token_bytes(uint32_t n_vocab) {
  std::vector<std::string> out;
  if (n_vocab <= 1) return out;
  const size_t want = n_vocab - 1;
  out.reserve(want);
  for (int b = 0; b < 256 && out.size() < want; ++b)
    out.push_back(std::string(1, static_cast<char>(b)));
  // N-grams over letters in rough English frequency order, space first: short, common pieces
  // come first, so a small vocab still merges the most frequent pairs.
  static constexpr std::string_view kChars =
      " etaoinsrhldcumfpgwybvkxjqz.,ETAOINSRHLDCUMFPGWYBVKXJQZ";
  std::string gram;
  for (size_t n = 2; out.size() < want; ++n) {
    std::vector<size_t> idx(n, 0);
    while (out.size() < want) {
      gram.clear();
      for (size_t k : idx) gram += kChars[k];
      out.push_back(gram);
      size_t d = n;  // odometer increment, last position fastest
      while (d > 0 && ++idx[d - 1] == kChars.size()) idx[--d] = 0;
      if (d == 0) break;
    }
  }
  return out;
}

Vocab make_vocab(uint32_t n_vocab, const std::optional<std::string>& world_vocab_path) {
  if (n_vocab == 0) throw EngineError("vocab size must be at least 1");
  Vocab v;
  v.tokens.reserve(n_vocab);
  v.types.reserve(n_vocab);
  v.tokens.push_back("<s>");
  v.types.push_back(kTokenControl);
  std::vector<std::string> bytes;
  if (world_vocab_path) {
    bytes = read_world_vocab(*world_vocab_path);
    v.world = true;
  } else {
    bytes = generated_token_bytes(n_vocab);
  }
  for (uint32_t id = 1; id < n_vocab; ++id) {
    if (id - 1 < bytes.size()) {
      v.tokens.push_back(escape_token(bytes[id - 1]));
      v.types.push_back(kTokenNormal);
    } else {
      v.tokens.push_back("[PAD" + std::to_string(id) + "]");
      v.types.push_back(kTokenUnused);
    }
  }
  return v;
}

}  // namespace rwkvd::tools::synth
