#pragma once
// Records a forward plan's steps (forward_plan.h) through Kernels: the one place where a step
// becomes Vulkan commands. A plan-only Kernels logs them instead, which gives the dispatches a
// plan will make (their pipelines and grids, the barriers) without a device.
#include <vulkan/vulkan.h>

#include <span>
#include <vector>

#include "engine/vk/forward_plan.h"
#include "engine/vk/kernels.h"

namespace rwkvd::engine::vk {

struct StepTargets {
  VkDescriptorSet set = VK_NULL_HANDLE;  // the step's (Step::set, resolved by the caller)
  VkBuffer act = VK_NULL_HANDLE, readback = VK_NULL_HANDLE;  // for the copy out
};

void record_step(Kernels& k, VkCommandBuffer cb, const Step& step, const StepTargets& targets);

// The dispatches and barriers (Dispatch with an empty key) of these steps, each with the index
// of the step that made it.
struct PlannedDispatch {
  size_t step = 0;
  Dispatch dispatch;
};
std::vector<PlannedDispatch> planned_dispatches(const Kernels& kernels,
                                                std::span<const Step> steps);

}  // namespace rwkvd::engine::vk
