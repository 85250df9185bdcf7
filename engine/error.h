#pragma once
// The engine's one error type. Every failure the engine can report (a malformed file, an
// unsupported type, a bad argument, a device failure) is an EngineError with a readable message
// that names the file, tensor or key involved.
#include <stdexcept>
#include <string>

namespace rwkvd::engine {

class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace rwkvd::engine
