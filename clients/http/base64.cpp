#include "clients/http/base64.h"

#include <openssl/evp.h>

#include <bit>
#include <cstring>

#include "clients/http/api_error.h"

namespace rwkvd::http {

static_assert(std::endian::native == std::endian::little, "float32 bytes are sent as they are");

std::string base64_floats(std::span<const float> v) {
  const auto bytes = std::as_bytes(v);
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::vector<float> floats_from_base64(const std::string& text, const std::string& param) {
  // EVP_DecodeBlock takes whole 4-character groups and counts '=' padding as zero bytes.
  if (text.size() % 4 != 0) throw bad_field(param, "'" + param + "' is not base64");
  std::string bytes(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) throw bad_field(param, "'" + param + "' is not base64");
  size_t len = static_cast<size_t>(n);
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) len -= 1;
  if (len % sizeof(float) != 0)
    throw bad_field(param, "'" + param + "' is not a whole number of float32 values");
  std::vector<float> out(len / sizeof(float));
  if (len > 0) std::memcpy(out.data(), bytes.data(), len);
  return out;
}

}  // namespace rwkvd::http
