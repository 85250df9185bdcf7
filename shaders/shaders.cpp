#include "shaders/shaders.h"

#include <stdexcept>
#include <string>

namespace rwkvd::shaders {

std::span<const uint32_t> find(std::string_view name) {
  for (const Shader& s : all()) {
    if (s.name == name) return s.words;
  }
  throw std::out_of_range("rwkvd: no embedded shader named " + std::string(name));
}

}  // namespace rwkvd::shaders
