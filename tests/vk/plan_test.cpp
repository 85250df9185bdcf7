// Which kernel each dispatch of a forward takes, without a device: the forward's plan
// (forward_plan.h) of a 2.9B-shaped model of each file type (zero weights, written as holes in
// a moment) on named device profiles (lavapipe, lavapipe with KHR cooperative matrices, an H200, an AMD GPU) with their class's tuning,
// for a decode step of one sequence, of 8 and of 256 sequences, and a long chunk of 512 tokens:
// layer 1 (a layer with every product) and the head, with the forms each product reads and writes
// and the barriers. The table is tests/vk/golden/forward_plans.txt: a rule or tuning change that
// moves a kernel shows there in review.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/model.h"
#include "engine/vk/device_profile.h"
#include "engine/vk/forward_plan.h"
#include "engine/vk/plan_text.h"
#include "engine/vk/tuning.h"
#include "shaders/shaders.h"
#include "tools/synth/synth.h"

namespace rwkvd::engine::vk {
namespace {

// A zero-weight 2.9B-shaped model of each file type, made once for the whole test.
const Rwkv7Model& model_2_9b(const std::string& type) {
  static std::map<std::string, std::shared_ptr<const Rwkv7Model>> made;
  auto& m = made[type];
  if (!m) {
    tools::synth::SynthConfig cfg;
    cfg.layers = 32;
    cfg.embd = 2560;
    cfg.type = *tools::synth::parse_file_type(type);
    cfg.zeros = true;
    const std::filesystem::path path =
        std::filesystem::path(::testing::TempDir()) / ("plan-2.9b-" + type + ".gguf");
    tools::synth::synthesize(cfg, path.string());
    m = Rwkv7Model::load(path.string());
    std::filesystem::remove(path);  // (the mapping keeps it)
  }
  return *m;
}

// Layer 1 and the head of a forward of T tokens over B sequences, each wanting its last logits.
void plan_lines(const std::string& profile, const std::string& type, uint32_t T, uint32_t B,
                std::string& out) {
  const DeviceProfile p = named_device_profile(profile);
  const Kernels k(p, tuning_table(p.device_class()), nullptr);
  const Rwkv7Model& m = model_2_9b(type);
  const WeightLayout weights(m, UINT32_MAX);
  const ForwardPlanner planner(k, m, weights,
                               ForwardGeometry::fit(m.hparams(), 1024, 64, UINT32_MAX));
  const ForwardShape shape{T, B, B, B, false, (T + B - 1) / B};
  const std::string head =
      profile + " " + type + " T=" + std::to_string(T) + " B=" + std::to_string(B);
  out += head + " layer 1\n" + segment_text(planner, 2, shape);
  out += head + " head\n" + segment_text(planner, planner.n_segments() - 1, shape);
}

std::string all_plans() {
  std::string out;
  for (const std::string& profile : device_profile_names()) {
    for (const char* type : {"f32", "f16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"}) {
      for (const auto& [T, B] : {std::pair{1u, 1u}, {8u, 8u}, {256u, 256u}, {512u, 1u}}) {
        plan_lines(profile, type, T, B, out);
      }
    }
  }
  return out;
}

std::vector<std::string> lines_of(std::istream& in) {
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

TEST(VkPlan, EveryForwardTakesTheKernelsOfTheGoldenTable) {
  const std::string text = all_plans();
  const std::filesystem::path now =
      std::filesystem::path(::testing::TempDir()) / "forward_plans.txt";
  std::ofstream(now) << text;
  const std::filesystem::path golden =
      std::filesystem::path(RWKVD_SOURCE_DIR) / "tests/vk/golden/forward_plans.txt";
  std::ifstream in(golden);
  ASSERT_TRUE(in) << golden << " (this build's table: " << now << ")";
  const std::vector<std::string> want = lines_of(in);
  std::istringstream got_in(text);
  const std::vector<std::string> got = lines_of(got_in);
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
