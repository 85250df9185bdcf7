// The tuning tables (engine/vk/tuning.cpp) against tests/vk/golden/tuning.txt, and the override
// of $RWKVD_VK_TUNING: values it names replace the table's, anything else is an error naming
// the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/error.h"
#include "engine/vk/device.h"
#include "engine/vk/tuning.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::engine::vk {
namespace {

constexpr DeviceClass kClasses[] = {DeviceClass::kNvidiaHopper, DeviceClass::kNvidia,
                                    DeviceClass::kAmd,          DeviceClass::kIntel,
                                    DeviceClass::kPortable,     DeviceClass::kCpu};

// The message of the EngineError that fn throws ("" when it throws none).
template <class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

TEST(VkTuning, EveryClassTableEqualsTheGoldenTable) {
  std::ifstream in(std::filesystem::path(RWKVD_SOURCE_DIR) / "tests/vk/golden/tuning.txt");
  ASSERT_TRUE(in);
  std::vector<std::string> keys;
  std::map<std::string, std::vector<std::string>> golden;  // key -> a value per class
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string key, v;
    words >> key;
    keys.push_back(key);
    while (words >> v) golden[key].push_back(v);
  }
  for (size_t c = 0; c < std::size(kClasses); ++c) {
    SCOPED_TRACE(device_class_name(kClasses[c]));
    const nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(tuning_json(tuning_table(kClasses[c])));
    std::vector<std::string> got_keys;
    for (const auto& [key, value] : j.items()) {
      got_keys.push_back(key);
      ASSERT_EQ(golden[key].size(), std::size(kClasses)) << key;
      EXPECT_EQ(value.dump(), golden[key][c]) << key;
    }
    EXPECT_EQ(got_keys, keys);
  }
}

TEST(VkTuning, JsonOverridesTheValuesItNames) {
  Tuning t = tuning_table(DeviceClass::kNvidiaHopper);
  const Tuning before = t;
  apply_tuning_json(t, R"({"mv_max_t": 0, "fuse_lora": false, "mc_rows": 128})", "test");
  EXPECT_EQ(t.mv_max_t, 0u);
  EXPECT_FALSE(t.fuse_lora);
  EXPECT_EQ(t.mc_rows, 128u);
  t.mv_max_t = before.mv_max_t;
  t.fuse_lora = before.fuse_lora;
  t.mc_rows = before.mc_rows;
  EXPECT_EQ(t, before);  // nothing else moved
  apply_tuning_json(t, "{}", "test");
  EXPECT_EQ(t, before);
}

TEST(VkTuning, BadOverridesAreErrorsNamingTheKey) {
  Tuning t = tuning_table(DeviceClass::kCpu);
  const Tuning before = t;
  const auto apply = [&](const char* text) {
    return error_of([&] { apply_tuning_json(t, text, "file.json"); });
  };
  EXPECT_NE(apply(R"({"mv_max_tokens": 4})").find("unknown tuning key \"mv_max_tokens\""),
            std::string::npos);
  EXPECT_NE(apply(R"({"mv_max_t": -1})").find("mv_max_t must be an integer"), std::string::npos);
  EXPECT_NE(apply(R"({"mv_max_t": 1.5})").find("mv_max_t"), std::string::npos);
  EXPECT_NE(apply(R"({"mv_max_t": "16"})").find("mv_max_t"), std::string::npos);
  EXPECT_NE(apply(R"({"mc_rows": 96})").find("mc_rows must be an integer, one of 0, 64, 128"),
            std::string::npos);
  EXPECT_NE(apply(R"({"mcd_sg": 9})").find("mcd_sg must be an integer, 1 to 8"), std::string::npos);
  EXPECT_NE(apply(R"({"fuse_lora": 1})").find("fuse_lora must be true or false"),
            std::string::npos);
  EXPECT_NE(apply("[1, 2]").find("one JSON object"), std::string::npos);
  EXPECT_NE(apply("{\"mv_max_t\": ").find("file.json: not JSON"), std::string::npos);
  EXPECT_EQ(t.mv_max_t, before.mv_max_t);
  // A value set in code is checked as well.
  t.wkv_lanes = 5;
  EXPECT_NE(error_of([&] { check_tuning(t, "patch"); }).find("wkv_lanes = 5"), std::string::npos);
}

// The environment's file goes on top of the class's table, then the caller's patch; a missing
// file is an error that names it.
TEST(VkTuning, ChooseTuningReadsTheFileOfTheEnvironment) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "rwkvd-tuning-test.json";
  std::ofstream(path) << R"({"mvq_pieces": 4, "wkv_group": 2})";
  setenv("RWKVD_VK_TUNING", path.c_str(), 1);
  const Tuning t = choose_tuning(DeviceClass::kNvidiaHopper, [](Tuning& x) { x.wkv_group = 1; });
  setenv("RWKVD_VK_TUNING", (path.string() + ".absent").c_str(), 1);
  const std::string missing = error_of([] { choose_tuning(DeviceClass::kAmd); });
  unsetenv("RWKVD_VK_TUNING");
  std::filesystem::remove(path);
  EXPECT_EQ(t.mvq_pieces, 4u);
  EXPECT_EQ(t.wkv_group, 1u);
  EXPECT_EQ(t.mv_max_t, tuning_table(DeviceClass::kNvidiaHopper).mv_max_t);
  EXPECT_NE(missing.find(".absent: cannot read the file"), std::string::npos) << missing;
  EXPECT_EQ(choose_tuning(DeviceClass::kCpu), tuning_table(DeviceClass::kCpu));
}

// The device at hand takes its class's table (no override in the environment), and says which;
// lavapipe as CI runs it is the named profile "lavapipe" (the plan tests' profile of it).
TEST(VkTuning, TheDeviceTakesItsClassTable) {
  if (std::getenv("RWKVD_VK_TUNING") != nullptr) GTEST_SKIP() << "RWKVD_VK_TUNING is set";
  test::keep_driver_loaded();
  test::enable_validation();
  const uint64_t errors = Device::validation_errors();
  Device dev;
  const DeviceClass c = dev.profile().device_class();
  std::printf("[ tuning   ] %s: the %s table\n", dev.name().c_str(), device_class_name(c));
  EXPECT_EQ(dev.tuning(), choose_tuning(c));
  EXPECT_EQ(c == DeviceClass::kCpu, dev.props().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);
  const DeviceProfile named = named_device_profile("lavapipe");
  if (dev.profile().vendor_id == named.vendor_id &&
      dev.profile().features.subgroup_size == named.features.subgroup_size) {
    const DeviceProfile& p = dev.profile();
    const DeviceFeatures &f = p.features, &g = named.features;
    EXPECT_EQ(p.type, named.type);
    EXPECT_EQ(std::tie(f.float16, f.storage16, f.storage8, f.subgroup_arith, f.subgroup_shuffle,
                       f.coopmat, f.int_dot, f.int_dot_fast),
              std::tie(g.float16, g.storage16, g.storage8, g.subgroup_arith, g.subgroup_shuffle,
                       g.coopmat, g.int_dot, g.int_dot_fast));
    EXPECT_EQ(std::tie(p.max_workgroup_size, p.max_workgroup_invocations, p.max_shared_memory,
                       p.max_workgroup_count),
              std::tie(named.max_workgroup_size, named.max_workgroup_invocations,
                       named.max_shared_memory, named.max_workgroup_count));
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

}  // namespace
}  // namespace rwkvd::engine::vk
