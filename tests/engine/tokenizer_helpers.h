#pragma once
// Small helpers shared by the tokenizer tests that need no fixtures.
#include <string>
#include <vector>

#include "engine/error.h"

namespace rwkvd::test {

// The message of the EngineError `fn` throws, or "(no exception)".
std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const engine::EngineError& e) {
    return e.what();
  }
  return "(no exception)";
}

// The 256 single bytes, token id = byte: the smallest vocab that can encode anything.
inline std::vector<std::string> byte_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  return t;
}

}  // namespace rwkvd::test
