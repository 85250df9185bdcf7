// Which kernel each product of a layer takes, without a device: a plan-only Kernels (no
// pipelines: every dispatch goes to its log) on named device profiles (lavapipe, an H200, an AMD
// GPU) with their class's tuning, for every weight type, at one token (decode), 8 tokens (8
// sequences decoding) and 512 (a long chunk). The products have the shapes of a 2.9B layer and
// every input form the forward offers (floats, int8, fp16; split-K scratch); output forms and
// shifts in front are the forward's to add. The table is tests/vk/golden/plans.txt: a rule or
// tuning change that moves a kernel shows there in review.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/ggml_type.h"
#include "engine/vk/device_layout.h"
#include "engine/vk/device_profile.h"
#include "engine/vk/kernels.h"
#include "engine/vk/tuning.h"
#include "shaders/shaders.h"

namespace rwkvd::engine::vk {
namespace {

constexpr uint32_t kD = 2560, kFfn = 10240, kVocab = 65536;
constexpr uint32_t kRanks[4] = {96, 96, 320, 64};  // w, a, g, v

// Distinct act offsets a product's slots read and write (their values matter only for
// alignment checks: multiples of 16 floats).
struct Offsets {
  uint32_t next = 0;
  uint32_t take() { return next += 1u << 20; }
};

MmSlot product(Offsets& o, uint32_t K, uint32_t N, GgmlType type, bool half_inputs, bool layer) {
  MmSlot s{K, N, o.take(), o.take(), MmMode::kStore, 0, o.take()};
  s.row_bytes = static_cast<uint32_t>(device_row_bytes(type, K));
  if (half_inputs) s.h16_off = o.take();
  if (layer) {  // split-K scratch: the logits region, as the forward gives its layers
    s.part_off = o.take();
    s.part_width = kVocab;
  }
  return s;
}

std::string key_text(const Pipelines::Key& k) {
  std::string out = k.first + "{";
  for (size_t i = 0; i < k.second.size(); ++i) out += (i ? "," : "") + std::to_string(k.second[i]);
  return out + "}";
}

// The dispatches of one product as text: "pipeline{constants} x,y,z", barriers as "|".
std::string plan_of(Kernels& k, GgmlType type, const std::vector<MmSlot>& slots, uint32_t T) {
  k.clear_dispatch_log();
  k.mm(VK_NULL_HANDLE, VK_NULL_HANDLE, type, slots, T);
  std::string out;
  for (const Dispatch& d : k.dispatch_log()) {
    if (!out.empty()) out += " ";
    out += d.key.first.empty() ? "|"
                               : key_text(d.key) + " " + std::to_string(d.x) + "," +
                                     std::to_string(d.y) + "," + std::to_string(d.z);
  }
  return out;
}

// Every product of a layer and the head for one profile, type and token count.
void plan_lines(const std::string& profile, GgmlType type, uint32_t T,
                std::vector<std::string>& out) {
  const DeviceProfile p = named_device_profile(profile);
  Kernels k(p, tuning_table(p.device_class()), nullptr);
  const bool quantised = ggml_traits(type).block_elems > 1;
  Offsets o;
  std::vector<MmSlot> down, up;
  for (const uint32_t r : kRanks) {
    down.push_back(product(o, kD, r, GgmlType::F32, true, true));
    up.push_back(product(o, r, kD, GgmlType::F32, false, true));
  }
  for (auto* list : {&down, &up}) {
    for (MmSlot& s : *list) s.half_ok = quantised;  // the forward's rule for LoRA products
  }
  const std::vector<MmSlot> rkv(3, product(o, kD, kD, type, true, true));
  const struct {
    const char* role;
    GgmlType type;
    std::vector<MmSlot> slots;
  } products[] = {
      {"lora down", GgmlType::F32, down},
      {"r,k,v", type, rkv},
      {"lora up", GgmlType::F32, up},
      {"output", type, {product(o, kD, kD, type, true, true)}},
      {"ffn key", type, {product(o, kD, kFfn, type, true, true)}},
      {"ffn value", type, {product(o, kFfn, kD, type, true, true)}},
      {"head", type, {product(o, kD, kVocab, type, true, false)}},
  };
  for (const auto& pr : products) {
    std::ostringstream line;
    line << profile << " " << ggml_traits(type).name << " T=" << T << " " << pr.role << ": "
         << plan_of(k, pr.type, pr.slots, T);
    out.push_back(line.str());
  }
}

std::vector<std::string> all_plans() {
  std::vector<std::string> out;
  for (const std::string& profile : device_profile_names()) {
    for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0,
                             GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      for (const uint32_t T : {1u, 8u, 512u}) plan_lines(profile, t, T, out);
    }
  }
  return out;
}

TEST(VkPlan, EveryProductTakesTheKernelOfTheGoldenTable) {
  const std::filesystem::path golden =
      std::filesystem::path(RWKVD_SOURCE_DIR) / "tests/vk/golden/plans.txt";
  std::vector<std::string> want;
  std::ifstream in(golden);
  ASSERT_TRUE(in) << golden;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') want.push_back(line);
  }
  const std::vector<std::string> got = all_plans();
  const std::filesystem::path now = std::filesystem::path(::testing::TempDir()) / "plans.txt";
  std::ofstream(now) << [&] {
    std::string s;
    for (const std::string& l : got) s += l + "\n";
    return s;
  }();
  size_t shown = 0;
  for (size_t i = 0; i < std::max(got.size(), want.size()) && shown < 20; ++i) {
    const std::string g = i < got.size() ? got[i] : "(none)",
                      w = i < want.size() ? want[i] : "(none)";
    if (g != w) {
      ADD_FAILURE() << "line " << i << "\n  golden: " << w << "\n  now:    " << g;
      ++shown;
    }
  }
  EXPECT_EQ(got.size(), want.size()) << "this build's table: " << now;
}

// The classes' tables as chosen from the profiles' identities: the H200 takes Hopper's, lavapipe
// the CPU devices', the AMD GPU its vendor's.
TEST(VkPlan, ProfilesChooseTheirDeviceClass) {
  EXPECT_EQ(named_device_profile("h200").device_class(), DeviceClass::kNvidiaHopper);
  EXPECT_EQ(named_device_profile("lavapipe").device_class(), DeviceClass::kCpu);
  EXPECT_EQ(named_device_profile("amd").device_class(), DeviceClass::kAmd);
  EXPECT_EQ(device_class(0x10de, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "NVIDIA H100 80GB HBM3"),
            DeviceClass::kNvidiaHopper);
  EXPECT_EQ(device_class(0x10de, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "NVIDIA GH200 480GB"),
            DeviceClass::kNvidiaHopper);
  EXPECT_EQ(device_class(0x10de, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "NVIDIA GeForce RTX 4090"),
            DeviceClass::kNvidia);
  EXPECT_EQ(device_class(0x10de, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "NVIDIA A100-SXM4-80GB"),
            DeviceClass::kNvidia);
  EXPECT_EQ(device_class(0x8086, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, "Intel(R) Arc(tm)"),
            DeviceClass::kIntel);
  EXPECT_EQ(device_class(0x13b5, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, "Mali-G710"),
            DeviceClass::kPortable);
  EXPECT_THROW(named_device_profile("h300"), EngineError);
}

// The product embeds no diagnostic build (their results are wrong) and no benchmark's kernel: no
// tuning can reach them from rwkvd. vk_kernel_bench has them (shaders/CMakeLists.txt).
TEST(VkPlan, TheProductEmbedsNoBenchShader) {
  for (const shaders::Shader& s : shaders::all()) {
    EXPECT_EQ(s.name.find("diag"), std::string_view::npos) << s.name;
    EXPECT_NE(s.name, "grid_sync");
  }
  EXPECT_GT(shaders::all().size(), 100u);
}

}  // namespace
}  // namespace rwkvd::engine::vk
