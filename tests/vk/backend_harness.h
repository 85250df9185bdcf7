#pragma once
// Helpers for tests of the whole Vulkan backend: open a model with validation on, and a
// fixture that fails on any validation error (run_one and the shared checks come with it).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/vk/device.h"
#include "engine/vk/tuning.h"
#include "engine/vk/vk_backend.h"
#include "tests/support/backend_checks.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {

// patch: a change to the device's tuning (engine/vk/tuning.h); the backend then gets a device of
// its own made with it.
inline std::unique_ptr<engine::VkBackend> gpu(const std::filesystem::path& p, uint32_t chunk = 256,
                                              uint32_t slots = 1,
                                              const engine::vk::TuningPatch& patch = {}) {
  keep_driver_loaded();
  enable_validation();
  engine::BackendOptions o;
  o.max_chunk = chunk;
  o.n_slots = slots;
  return engine::make_vk_backend(engine::Rwkv7Model::load(p.string()), o,
                                 patch ? engine::make_vk_context(patch) : nullptr);
}

class VkBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { errors_ = engine::vk::Device::validation_errors(); }
  void TearDown() override { RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors_); }
  uint64_t errors_ = 0;
};

}  // namespace rwkvd::test
