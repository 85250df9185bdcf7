// The pipeline cache on disk: a closing process leaves a valid VkPipelineCache blob where
// $RWKVD_VK_PIPELINE_CACHE points (header: its own length, version one, this device's vendor
// and device ids), the next one starts from it, and a corrupt file is ignored, not fatal.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::vk::Device;

std::vector<char> slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(VkPipelineCache, IsWrittenOnCloseAndReadBack) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("rwkvd-pipeline-cache-" + std::to_string(::getpid()) + ".bin");
  std::filesystem::remove(path);
  setenv("RWKVD_VK_PIPELINE_CACHE", path.c_str(), 1);
  uint32_t vendor = 0, device = 0;
  {
    VkRig rig;
    vendor = rig.dev->props().vendorID;
    device = rig.dev->props().deviceID;
    rig.pipes->get("shift", {16});
  }
  std::vector<char> blob = slurp(path);
  ASSERT_GE(blob.size(), 16u) << "no cache written at " << path;
  uint32_t head[4];
  std::memcpy(head, blob.data(), sizeof head);
  EXPECT_GE(head[0], 32u);  // header length: 16 bytes of fields + the 16-byte cache UUID
  EXPECT_EQ(head[1], static_cast<uint32_t>(VK_PIPELINE_CACHE_HEADER_VERSION_ONE));
  EXPECT_EQ(head[2], vendor);
  EXPECT_EQ(head[3], device);

  {  // starts from the file and rewrites it
    VkRig rig;
    const uint64_t errors = Device::validation_errors();
    EXPECT_NE(rig.pipes->get("shift", {16}), VK_NULL_HANDLE);
    RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
  }
  EXPECT_GE(slurp(path).size(), 16u);

  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a pipeline cache";
  {  // a foreign blob is dropped: the pipelines still build
    VkRig rig;
    EXPECT_NE(rig.pipes->get("shift", {16}), VK_NULL_HANDLE);
  }
  unsetenv("RWKVD_VK_PIPELINE_CACHE");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rwkvd::test
