#include "engine/vk/device_layout.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "engine/error.h"

namespace rwkvd::engine::vk {
namespace {

constexpr uint64_t kQ6Block = 210, kQ6Body = 208, kQ6Group = 8;
constexpr uint64_t kQ6GroupBytes = 16 + kQ6Group * kQ6Body;  // 1680: the same as 8 blocks

uint64_t gguf_row_bytes(GgmlType t, uint64_t K) {
  const std::optional<uint64_t> b = ggml_row_bytes(t, K);
  if (!b)
    throw EngineError("vulkan: rows of " + std::to_string(K) + " elements do not fit their type");
  return *b;
}

// Bytes of nb Q6_K blocks in groups (a last partial group takes its 16-byte d word too).
uint64_t q6_grouped_bytes(uint64_t nb) {
  const uint64_t rest = nb % kQ6Group;
  return nb / kQ6Group * kQ6GroupBytes + (rest ? 16 + rest * kQ6Body : 0);
}

}  // namespace

bool rewrites_rows(GgmlType t) {
  return t == GgmlType::Q6_K;
}

uint64_t device_row_bytes(GgmlType t, uint64_t K) {
  if (!rewrites_rows(t)) return gguf_row_bytes(t, K);
  const uint64_t b = q6_grouped_bytes(gguf_row_bytes(t, K) / kQ6Block);
  // An odd number of 16-byte words: mcd.comp's lanes read 16 rows at the same offset, and an
  // even stride put them on fewer cache positions (H200, Q6_K 2560 -> 10240 at 8 tokens: 37.2
  // us with rows of 2112 bytes, 33.5 with 2128).
  return b / 16 % 2 == 0 ? b + 16 : b;
}

void to_device_rows(GgmlType t, uint64_t K, const std::byte* src, std::byte* dst, uint64_t rows) {
  const uint64_t src_row = gguf_row_bytes(t, K), dst_row = device_row_bytes(t, K);
  if (!rewrites_rows(t)) {
    std::memcpy(dst, src, src_row * rows);
    return;
  }
  const uint64_t nb = src_row / kQ6Block, used = q6_grouped_bytes(nb);
  for (uint64_t r = 0; r < rows; ++r) {
    const std::byte* in = src + r * src_row;
    std::byte* out = dst + r * dst_row;
    std::memset(out + used, 0, dst_row - used);
    for (uint64_t g = 0; g * kQ6Group < nb; ++g) {
      const uint64_t n = std::min(kQ6Group, nb - g * kQ6Group);
      std::byte* d = out + g * kQ6GroupBytes;
      std::memset(d, 0, 16);
      for (uint64_t i = 0; i < n; ++i) {
        const std::byte* blk = in + (g * kQ6Group + i) * kQ6Block;
        std::memcpy(d + 2 * i, blk + kQ6Body, 2);
        std::memcpy(d + 16 + i * kQ6Body, blk, kQ6Body);
      }
    }
  }
}

}  // namespace rwkvd::engine::vk
