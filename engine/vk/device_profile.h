#pragma once
// What the kernels' choices read of a device, as a plain value: its identity, the optional
// features rwkvd enabled on it, and the limits that size workgroups. Device::profile() holds the
// device's own; named_device_profile() makes those of known devices without one, so that which
// kernel each product takes there can be checked on any machine (tests/vk/plan_test.cpp).
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/vk/tuning.h"

namespace rwkvd::engine::vk {

struct DeviceFeatures {
  bool float16 = false;           // shaderFloat16
  bool storage16 = false;         // storageBuffer16BitAccess
  bool storage8 = false;          // storageBuffer8BitAccess
  bool subgroup_arith = false;    // compute-stage subgroup add (the _sg matmul variant)
  bool subgroup_shuffle = false;  // and shuffles (wkv_sg)
  uint32_t subgroup_size = 0;
  // VK_NV_cooperative_matrix with 16x16x16 fp16 x fp16 -> fp32 subgroup matrices and 32-wide
  // subgroups: the tensor-core prefill product (mc.comp).
  bool coopmat = false;
  // VK_KHR_cooperative_matrix (any vendor): the fp16 x fp16 -> fp32 subgroup fragment, M x N x K,
  // that mc.comp's MC_KHR variant takes (0 x 0 x 0: none; Device picks the largest that fits).
  uint32_t khr_m = 0, khr_n = 0, khr_k = 0;
  // VK_KHR_shader_integer_dot_product: OpSDot on four packed bytes (mvq.comp's int8 inputs).
  // int_dot_fast: the driver says the 4x8-bit packed signed form is accelerated (lavapipe
  // offers the feature but emulates it).
  bool int_dot = false;
  bool int_dot_fast = false;
  // VK_KHR_pipeline_executable_properties, enabled only with RWKVD_VK_TRACE=pipelines: every
  // pipeline created prints the driver's statistics for it (registers, spills, ...) to stderr.
  bool pipeline_stats = false;
};

struct DeviceProfile {
  std::string name;
  uint32_t vendor_id = 0, device_id = 0;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  DeviceFeatures features;
  uint32_t max_workgroup_size = 0;         // maxComputeWorkGroupSize[0]
  uint32_t max_workgroup_invocations = 0;  // maxComputeWorkGroupInvocations
  uint32_t max_shared_memory = 0;          // maxComputeSharedMemorySize (bytes)
  uint32_t max_workgroup_count = 0;        // maxComputeWorkGroupCount[0]

  DeviceClass device_class() const { return vk::device_class(vendor_id, type, name); }
};

// The profile of a device seen through its physical properties and the features enabled.
DeviceProfile make_device_profile(const VkPhysicalDeviceProperties& props,
                                  const DeviceFeatures& features);
// The features a tuning leaves on (Tuning::subgroups, coopmat, int_dot): what Device enables.
DeviceFeatures allowed_features(DeviceFeatures f, const Tuning& t);

// Known devices: "lavapipe" (Mesa's CPU driver as CI runs it), "h200" (NVIDIA H200: tensor
// cores, integer dot products), "amd" (an RDNA GPU on RADV: 64-wide subgroups, integer dot
// products, no cooperative matrices of the kind mc.comp takes). Throws EngineError naming the
// known ones for another name.
DeviceProfile named_device_profile(std::string_view name);
std::vector<std::string> device_profile_names();

}  // namespace rwkvd::engine::vk
