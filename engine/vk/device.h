#pragma once
// One Vulkan device for compute: instance, physical device choice, logical device with the
// optional features rwkvd uses when present, one compute queue, a transfer queue for the weight
// upload where the device has a transfer-only queue family (else the compute queue serves), and
// (RWKVD_VK_VALIDATION=1) the Khronos validation layer with a messenger that counts errors so
// tests can fail on them.
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace rwkvd::engine::vk {

struct DeviceFeatures {
  bool float16 = false;           // shaderFloat16
  bool storage16 = false;         // storageBuffer16BitAccess
  bool storage8 = false;          // storageBuffer8BitAccess
  bool subgroup_arith = false;    // compute-stage subgroup add (the _sg matmul variant)
  bool subgroup_shuffle = false;  // and shuffles (wkv_sg)
  uint32_t subgroup_size = 0;
  // VK_NV_cooperative_matrix with 16x16x16 fp16 x fp16 -> fp32 subgroup matrices and 32-wide
  // subgroups: the tensor-core prefill product (mc.comp). $RWKVD_VK_COOPMAT=0 turns it off.
  bool coopmat = false;
  // VK_KHR_shader_integer_dot_product: OpSDot on four packed bytes (mvq.comp's int8 inputs).
  // int_dot_fast: the driver says the 4x8-bit packed signed form is accelerated (lavapipe
  // offers the feature but emulates it). $RWKVD_VK_INT_DOT=0 turns it off.
  bool int_dot = false;
  bool int_dot_fast = false;
  // VK_KHR_pipeline_executable_properties, enabled only with $RWKVD_VK_PIPELINE_STATS=1: every
  // pipeline created prints the driver's statistics for it (registers, spills, ...) to stderr.
  bool pipeline_stats = false;
};

class Device {
 public:
  // Picks the device named by $RWKVD_DEVICE (index, or a substring of the name), else the first
  // discrete GPU, else the first integrated, else any. Throws EngineError when none exists.
  // $RWKVD_VK_NO_SUBGROUP=1 disables the subgroup kernels (to test the portable fallback).
  Device();
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical() const { return phys_; }
  VkDevice device() const { return dev_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return family_; }
  const VkPhysicalDeviceProperties& props() const { return props_; }
  const VkPhysicalDeviceMemoryProperties& mem_props() const { return mem_props_; }
  const DeviceFeatures& features() const { return features_; }
  std::string name() const { return props_.deviceName; }
  // Hold this to submit to queue() (the forward, state transfers, and the uploader when there is
  // no dedicated transfer queue).
  std::mutex& queue_mutex() { return queue_mu_; }
  // The weight upload's queue: a transfer-only family's queue, or queue() itself when the device
  // has none or $RWKVD_VK_TRANSFER_QUEUE=0; its mutex is then queue_mutex().
  bool dedicated_transfer() const { return transfer_queue_ != queue_; }
  VkQueue transfer_queue() const { return transfer_queue_; }
  uint32_t transfer_family() const { return transfer_family_; }
  std::mutex& transfer_mutex() { return dedicated_transfer() ? transfer_mu_ : queue_mu_; }

  // How long a host wait for this device's work polls its fence before blocking (wait_fence):
  // 20 ms on GPUs, 0 on CPU devices; $RWKVD_VK_FENCE_SPIN_US overrides.
  uint64_t fence_spin_us() const { return fence_spin_us_; }

  // Validation errors reported since the device was created (0 when validation is off).
  static uint64_t validation_errors();
  static bool validation_enabled();

  // Memory type index with all of `required` flags (and preferably `preferred`); throws if none.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred = 0) const;

 private:
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice dev_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkQueue transfer_queue_ = VK_NULL_HANDLE;
  uint32_t transfer_family_ = 0;
  std::mutex transfer_mu_;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  DeviceFeatures features_;
  uint64_t fence_spin_us_ = 0;
  std::mutex queue_mu_;
};

}  // namespace rwkvd::engine::vk
