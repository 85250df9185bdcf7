#pragma once
// Reader for rwkv_vocab_v20230424.txt-style vocab files: lines `<id> <python literal> <n>`.
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::engine {

// Token bytes indexed by id (ids missing from the file get an empty entry). Throws EngineError
// with `path:line:` on any malformed line.
std::vector<std::string> read_vocab_file(const std::string& path);

// The same over text already in memory; `source` names it in error messages.
std::vector<std::string> parse_vocab_text(std::string_view text, const std::string& source);

// The bytes one Python literal stands for: a str literal ('...' or "...") gives the UTF-8 of its
// code points, a bytes literal (b'...') its bytes. Throws EngineError (without location) when
// the literal is malformed or uses an escape Python's repr() never writes.
std::string decode_python_literal(std::string_view literal);

}  // namespace rwkvd::engine
