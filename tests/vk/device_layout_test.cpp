// Weight rows in their device form (engine/vk/device_layout.h): Q6_K rows regrouped so that
// every field is 16-byte or 4-byte aligned; every other type's bytes as they are.
#include "engine/vk/device_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using rwkvd::engine::GgmlType;
using rwkvd::engine::vk::device_row_bytes;
using rwkvd::engine::vk::to_device_rows;

TEST(DeviceLayout, Q6KRowsTakeGroupsOfEightBlocks) {
  // Groups of 8 blocks take 8 x 210 bytes; a partial group 16 more than its blocks' 208 each;
  // 16 more where the row would be an even number of 16-byte words.
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 256), 16u + 208u + 16u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 768), 16u + 3 * 208u + 16u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 1024), 16u + 4 * 208u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 1280), 16u + 5 * 208u + 16u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 2048), 8 * 210u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 2560), 8 * 210u + 16u + 2 * 208u + 16u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q6_K, 10240), 40 * 210u);
  EXPECT_EQ(device_row_bytes(GgmlType::Q4_K, 2560), 10 * 144u);
  EXPECT_EQ(device_row_bytes(GgmlType::F32, 96), 96 * 4u);
}

TEST(DeviceLayout, Q6KBlocksLandWhereTheShadersReadThem) {
  constexpr uint64_t K = 2560, nb = K / 256, rows = 3;
  std::vector<std::byte> src(rows * nb * 210);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 7 + i / 210) & 0xff);
  const uint64_t row = device_row_bytes(GgmlType::Q6_K, K);
  ASSERT_EQ(row % 16, 0u);
  std::vector<std::byte> dst(rows * row, std::byte{0xee});
  to_device_rows(GgmlType::Q6_K, K, src.data(), dst.data(), rows);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t b = 0; b < nb; ++b) {
      // quant.glsl: q6_block() = group * 1680 + 16 + (b % 8) * 208, q6_d_byte() = group * 1680
      // + 2 (b % 8), from the row's start.
      const std::byte* in = src.data() + (r * nb + b) * 210;
      const std::byte* group = dst.data() + r * row + b / 8 * 1680;
      EXPECT_EQ(std::memcmp(group + 16 + b % 8 * 208, in, 208), 0) << "row " << r << " block " << b;
      EXPECT_EQ(std::memcmp(group + 2 * (b % 8), in + 208, 2), 0) << "row " << r << " block " << b;
    }
    // The last group's d word is zero past its two blocks, and so is the padding after them.
    const std::byte* last = dst.data() + r * row + 1680;
    for (int i = 4; i < 16; ++i) EXPECT_EQ(last[i], std::byte{0});
    for (uint64_t i = 1680 + 16 + 2 * 208; i < row; ++i) EXPECT_EQ(dst[r * row + i], std::byte{0});
  }
}

TEST(DeviceLayout, OtherTypesKeepTheirBytes) {
  std::vector<std::byte> src(2 * 1440), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 13);
  to_device_rows(GgmlType::Q4_K, 2560, src.data(), dst.data(), 2);
  EXPECT_EQ(src, dst);
}

}  // namespace
