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
#include <string_view>

#include "engine/vk/device_profile.h"
#include "engine/vk/tuning.h"

namespace rwkvd::engine::vk {

// Whether RWKVD_VK_TRACE (a comma-separated list) names `what`: "alloc" (a stderr line per buffer
// made: its size, memory kind and the driver's time) or "pipelines" (the driver's statistics of
// every pipeline made, and a line for each made after loading).
bool traces(std::string_view what);

class Device {
 public:
  // Picks the device named by $RWKVD_DEVICE (index, or a substring of the name), else the first
  // discrete GPU, else the first integrated, else any. Throws EngineError when none exists, or
  // when the tuning override is bad. Its tuning: the table of its class, the environment's
  // switches and $RWKVD_VK_TUNING, then `patch` (choose_tuning()).
  explicit Device(const TuningPatch& patch = {});
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
  const DeviceFeatures& features() const { return profile_.features; }
  const DeviceProfile& profile() const { return profile_; }
  const Tuning& tuning() const { return tuning_; }
  std::string name() const { return props_.deviceName; }
  // Hold this to submit to queue() (the forward, state transfers, and the uploader when there is
  // no dedicated transfer queue).
  std::mutex& queue_mutex() { return queue_mu_; }
  // The weight upload's queue: a transfer-only family's queue, or queue() itself when the device
  // has none or Tuning::transfer_queue is off; its mutex is then queue_mutex().
  bool dedicated_transfer() const { return transfer_queue_ != queue_; }
  VkQueue transfer_queue() const { return transfer_queue_; }
  uint32_t transfer_family() const { return transfer_family_; }
  std::mutex& transfer_mutex() { return dedicated_transfer() ? transfer_mu_ : queue_mu_; }

  // How long a host wait for this device's work polls its fence before blocking (wait_fence).
  uint64_t fence_spin_us() const { return tuning_.fence_spin_us; }

  // Validation errors reported since the device was created (0 when validation is off).
  static uint64_t validation_errors();
  static bool validation_enabled();

  // Memory type index with all of `required` flags (and preferably `preferred`); throws if none.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred = 0) const;

 private:
  void create_instance(bool validate);
  void choose_queue_families();
  void create_device();  // with every optional feature the device offers and the tuning allows
  void destroy_instance();
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
  Tuning tuning_;
  DeviceProfile profile_;
  std::mutex queue_mu_;
};

}  // namespace rwkvd::engine::vk
