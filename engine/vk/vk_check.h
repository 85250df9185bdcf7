#pragma once
// Turns a failed Vulkan call into an EngineError naming the call and the VkResult.
#include <vulkan/vulkan.h>

#include <string>

#include "engine/error.h"

namespace rwkvd::engine::vk {

const char* vk_result_name(VkResult r);

[[noreturn]] inline void vk_fail(VkResult r, const char* what) {
  throw EngineError(std::string("vulkan: ") + what + " failed: " + vk_result_name(r));
}

}  // namespace rwkvd::engine::vk

#define RWKVD_VK(call)                                                               \
  do {                                                                               \
    const VkResult rwkvd_vk_r_ = (call);                                             \
    if (rwkvd_vk_r_ != VK_SUCCESS) ::rwkvd::engine::vk::vk_fail(rwkvd_vk_r_, #call); \
  } while (0)
