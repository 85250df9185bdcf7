#include "engine/vk/device_profile.h"

#include "engine/error.h"

namespace rwkvd::engine::vk {
namespace {

// A GPU's features as rwkvd enables them where the driver offers everything it uses but the
// tensor cores and int8 speed, which the callers set.
DeviceFeatures gpu_features(uint32_t subgroup_size) {
  DeviceFeatures f;
  f.float16 = f.storage16 = f.storage8 = true;
  f.subgroup_arith = f.subgroup_shuffle = true;
  f.subgroup_size = subgroup_size;
  f.int_dot = true;
  return f;
}

// Mesa's llvmpipe on a host with 256-bit vectors (8-wide subgroups), as CI runs it: integer dot
// products offered but emulated, no tensor cores.
DeviceProfile lavapipe() {
  DeviceProfile p{"llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005, 0, VK_PHYSICAL_DEVICE_TYPE_CPU};
  p.features = gpu_features(8);
  p.max_workgroup_size = p.max_workgroup_invocations = 1024;
  p.max_shared_memory = 32768;
  p.max_workgroup_count = 65535;
  return p;
}

// Mesa 26's llvmpipe (Debian 13 backports; scripts/install-coopmat-lavapipe), as CI runs the
// tensor-core tests on the CPU: VK_KHR_cooperative_matrix with 8 x 8 x 8 fragments in 8-wide
// subgroups.
DeviceProfile lavapipe_coopmat() {
  DeviceProfile p = lavapipe();
  p.name = "llvmpipe (LLVM 19.1.7, 256 bits)";
  p.features.khr_m = p.features.khr_n = p.features.khr_k = 8;
  return p;
}

// NVIDIA's driver on an H200, as it reports itself (vk_kernel_bench's device line).
DeviceProfile h200() {
  DeviceProfile p{"NVIDIA H200", 0x10de, 0x2335, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU};
  p.features = gpu_features(32);
  p.features.coopmat = true;
  p.features.khr_m = p.features.khr_n = p.features.khr_k = 16;
  p.features.int_dot_fast = true;
  p.max_workgroup_size = p.max_workgroup_invocations = 1024;
  p.max_shared_memory = 49152;
  p.max_workgroup_count = 2147483647;
  return p;
}

// RADV on an RDNA 3 GPU: 64-wide subgroups, 64 KiB of shared memory, accelerated int8 dot
// products, no VK_NV_cooperative_matrix.
DeviceProfile amd() {
  DeviceProfile p{"AMD Radeon RX 7900 XTX (RADV NAVI31)", 0x1002, 0x744c,
                  VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU};
  p.features = gpu_features(64);
  p.features.int_dot_fast = true;
  p.max_workgroup_size = p.max_workgroup_invocations = 1024;
  p.max_shared_memory = 65536;
  p.max_workgroup_count = 65535;
  return p;
}

}  // namespace

DeviceProfile make_device_profile(const VkPhysicalDeviceProperties& props,
                                  const DeviceFeatures& features) {
  DeviceProfile p{props.deviceName, props.vendorID, props.deviceID, props.deviceType, features};
  p.max_workgroup_size = props.limits.maxComputeWorkGroupSize[0];
  p.max_workgroup_invocations = props.limits.maxComputeWorkGroupInvocations;
  p.max_shared_memory = props.limits.maxComputeSharedMemorySize;
  p.max_workgroup_count = props.limits.maxComputeWorkGroupCount[0];
  return p;
}

DeviceFeatures allowed_features(DeviceFeatures f, const Tuning& t) {
  if (!t.subgroups) f.subgroup_arith = f.subgroup_shuffle = false;
  // (mc.comp needs subgroup arithmetic: Device enables the matrices only with it.)
  if (!t.coopmat || !f.subgroup_arith) {
    f.coopmat = false;
    f.khr_m = f.khr_n = f.khr_k = 0;
  }
  if (!t.int_dot) f.int_dot = f.int_dot_fast = false;
  return f;
}

std::vector<std::string> device_profile_names() {
  return {"lavapipe", "lavapipe-coopmat", "h200", "amd"};
}

DeviceProfile named_device_profile(std::string_view name) {
  if (name == "lavapipe") return lavapipe();
  if (name == "lavapipe-coopmat") return lavapipe_coopmat();
  if (name == "h200") return h200();
  if (name == "amd") return amd();
  throw EngineError("unknown device profile \"" + std::string(name) +
                    "\" (known: lavapipe, lavapipe-coopmat, h200, amd)");
}

}  // namespace rwkvd::engine::vk
