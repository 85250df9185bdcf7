#pragma once
// Helpers for tests of the whole Vulkan backend: open a model with validation on, run one
// sequence from a fresh state, and a fixture that fails on any validation error.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/vk/device.h"
#include "engine/vk/vk_backend.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {

inline std::vector<float> run_one(engine::Backend& b, std::span<const int32_t> toks,
                                  engine::OutputMode mode, uint32_t slot = 0) {
  b.reset_state(slot);
  const engine::SequenceInput in{slot, toks, mode};
  return b.run({&in, 1})[0].data;
}

inline std::unique_ptr<engine::VkBackend> gpu(const std::filesystem::path& p, uint32_t chunk = 256,
                                              uint32_t slots = 1) {
  enable_validation();
  engine::BackendOptions o;
  o.max_chunk = chunk;
  o.n_slots = slots;
  return engine::make_vk_backend(engine::Rwkv7Model::load(p.string()), o);
}

class VkBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { errors_ = engine::vk::Device::validation_errors(); }
  void TearDown() override { RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors_); }
  uint64_t errors_ = 0;
};

}  // namespace rwkvd::test
