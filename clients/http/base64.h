#pragma once
// float32 tensors as base64 text of their little-endian bytes: OpenAI's `encoding_format:
// "base64"` embeddings, and RWKV states in and out of the state endpoints.
#include <span>
#include <string>
#include <vector>

namespace rwkvd::http {

std::string base64_floats(std::span<const float> v);
// ApiError 400 naming `param` for text that is not base64 of whole float32s.
std::vector<float> floats_from_base64(const std::string& text, const std::string& param);

}  // namespace rwkvd::http
