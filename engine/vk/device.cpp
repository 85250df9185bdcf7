#include "engine/vk/device.h"

#include "engine/vk/khr_coopmat.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {
namespace {

std::atomic<uint64_t> g_validation_errors{0};
std::atomic<bool> g_validation_enabled{false};

// Whether $name is exactly `value` ("1" turns an option on, "0" a default one off).
bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    g_validation_errors.fetch_add(1);
    std::fprintf(stderr, "rwkvd vulkan validation error: %s\n", data->pMessage);
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    std::fprintf(stderr, "rwkvd vulkan validation warning: %s\n", data->pMessage);
  }
  return VK_FALSE;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const VkLayerProperties& l) {
    return std::strcmp(l.layerName, name) == 0;
  });
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

VkPhysicalDevice choose_device(VkInstance instance) {
  uint32_t n = 0;
  RWKVD_VK(vkEnumeratePhysicalDevices(instance, &n, nullptr));
  std::vector<VkPhysicalDevice> devs(n);
  RWKVD_VK(vkEnumeratePhysicalDevices(instance, &n, devs.data()));
  // Only Vulkan 1.2+ devices: the kernels rely on 1.2 core (timeline semaphores, SPIR-V 1.5).
  std::vector<VkPhysicalDevice> usable;
  std::vector<std::string> names;
  for (VkPhysicalDevice d : devs) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d, &p);
    if (p.apiVersion >= VK_API_VERSION_1_2) {
      usable.push_back(d);
      names.emplace_back(p.deviceName);
    }
  }
  if (usable.empty()) throw EngineError("vulkan: no device supporting Vulkan 1.2 found");
  if (const char* want = std::getenv("RWKVD_DEVICE"); want != nullptr && *want != '\0') {
    char* end = nullptr;
    const unsigned long idx = std::strtoul(want, &end, 10);
    if (*end == '\0') {
      if (idx >= usable.size()) {
        throw EngineError("vulkan: RWKVD_DEVICE=" + std::string(want) + " but only " +
                          std::to_string(usable.size()) + " device(s)");
      }
      return usable[idx];
    }
    for (size_t i = 0; i < usable.size(); ++i) {
      if (names[i].find(want) != std::string::npos) return usable[i];
    }
    throw EngineError("vulkan: no device name contains RWKVD_DEVICE=" + std::string(want));
  }
  return *std::min_element(usable.begin(), usable.end(),
                           [](VkPhysicalDevice a, VkPhysicalDevice b) {
                             VkPhysicalDeviceProperties pa, pb;
                             vkGetPhysicalDeviceProperties(a, &pa);
                             vkGetPhysicalDeviceProperties(b, &pb);
                             return type_rank(pa.deviceType) < type_rank(pb.deviceType);
                           });
}

bool has_device_extension(VkPhysicalDevice d, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(d, nullptr, &n, exts.data());
  return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

// Whether the device multiplies 16x16 fp16 matrices into fp32 ones per subgroup (mc.comp's shape).
bool has_coopmat_f16(VkInstance instance, VkPhysicalDevice d) {
  auto props = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (props == nullptr) return false;
  uint32_t n = 0;
  if (props(d, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkCooperativeMatrixPropertiesNV> shapes(
      n, VkCooperativeMatrixPropertiesNV{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (props(d, &n, shapes.data()) != VK_SUCCESS) return false;
  return std::any_of(shapes.begin(), shapes.end(), [](const VkCooperativeMatrixPropertiesNV& c) {
    return c.MSize == 16 && c.NSize == 16 && c.KSize == 16 &&
           c.AType == VK_COMPONENT_TYPE_FLOAT16_NV && c.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
           c.CType == VK_COMPONENT_TYPE_FLOAT32_NV && c.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
           c.scope == VK_SCOPE_SUBGROUP_NV;
  });
}

// The largest fp16 x fp16 -> fp32 subgroup fragment of VK_KHR_cooperative_matrix that mc.comp's
// MC_KHR tiles (64 rows by 32 or 64 tokens, 64 inputs a step, 128 invocations) divide among their
// subgroups of `subgroup` lanes, in whole uvec4 runs of the staged halves (K, N multiples of 8
// and 4); {0, 0, 0} where the device offers none.
std::array<uint32_t, 3> khr_fragment(VkInstance instance, VkPhysicalDevice d, uint32_t subgroup) {
  auto props = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t n = 0;
  if (props == nullptr || subgroup == 0 || 128 % subgroup != 0 ||
      props(d, &n, nullptr) != VK_SUCCESS) {
    return {0, 0, 0};
  }
  std::vector<VkCooperativeMatrixPropertiesKHR> shapes(n);
  for (auto& s : shapes) s.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
  if (props(d, &n, shapes.data()) != VK_SUCCESS) return {0, 0, 0};
  std::array<uint32_t, 3> best{0, 0, 0};
  for (const VkCooperativeMatrixPropertiesKHR& c : shapes) {
    const bool types =
        c.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && c.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
        c.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && c.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
        c.scope == VK_SCOPE_SUBGROUP_KHR && !c.saturatingAccumulation;
    const uint32_t M = c.MSize, N = c.NSize, K = c.KSize;
    const bool tiles = M > 0 && N > 0 && K > 0 && K % 8 == 0 && 64 % K == 0 && N % 4 == 0 &&
                       64 % N == 0 && 32 % M == 0 && (32 / M) * (64 / N) % (128 / subgroup) == 0;
    if (types && tiles && M * N * K > best[0] * best[1] * best[2]) best = {M, N, K};
  }
  return best;
}

// The feature structures of vkCreateDevice's chain (members: their addresses stay put) and the
// extensions enabled; optional features join the chain after e12.
struct EnabledFeatures {
  VkPhysicalDeviceFeatures2 e2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features e11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features e12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR khr_cm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idp{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  std::vector<const char*> exts;
  template <class S>
  void chain(S& s, const char* extension) {
    s.pNext = e12.pNext;
    e12.pNext = &s;
    exts.push_back(extension);
  }
};

// Fills `s` (pNext null) from the device's features.
template <class S>
void query(VkPhysicalDevice d, S& s) {
  VkPhysicalDeviceFeatures2 q2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  q2.pNext = &s;
  vkGetPhysicalDeviceFeatures2(d, &q2);
  s.pNext = nullptr;
}

// The required features (throws without them) and the core optional ones, enabled in `en`; the
// device's subgroup properties.
DeviceFeatures core_features(VkPhysicalDevice d, EnabledFeatures& en) {
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f11;
  vkGetPhysicalDeviceFeatures2(d, &f2);
  if (!f12.timelineSemaphore) throw EngineError("vulkan: timeline semaphores are required");
  if (!f2.features.shaderStorageBufferArrayDynamicIndexing) {
    throw EngineError("vulkan: shaderStorageBufferArrayDynamicIndexing is required");
  }
  DeviceFeatures f;
  en.e11.pNext = &en.e12;
  en.e2.pNext = &en.e11;
  en.e2.features.shaderStorageBufferArrayDynamicIndexing = VK_TRUE;
  en.e2.features.shaderInt16 = f2.features.shaderInt16;
  en.e12.timelineSemaphore = VK_TRUE;
  en.e12.shaderFloat16 = f.float16 = f12.shaderFloat16;
  en.e12.storageBuffer8BitAccess = f.storage8 = f12.storageBuffer8BitAccess;
  en.e12.shaderInt8 = f12.shaderInt8;
  en.e11.storageBuffer16BitAccess = f.storage16 = f11.storageBuffer16BitAccess;
  VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sg;
  vkGetPhysicalDeviceProperties2(d, &p2);
  f.subgroup_size = sg.subgroupSize;
  f.subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                     (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                     sg.subgroupSize >= 4;
  f.subgroup_shuffle =
      f.subgroup_arith && (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  f.coopmat = f.int_dot = true;  // wanted: allowed_features() and the enable_*() decide
  return f;
}

// Tensor cores for prefill, where the driver offers the shape mc.comp uses.
void enable_coopmat(VkInstance instance, VkPhysicalDevice d, EnabledFeatures& en,
                    DeviceFeatures& f) {
  const bool wanted = f.coopmat;
  f.coopmat = false;
  if (!wanted || !f.float16 || !f.subgroup_arith || f.subgroup_size != 32 ||
      !has_device_extension(d, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    return;
  }
  query(d, en.cm);
  en.cm.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  if (!en.cm.cooperativeMatrix || !has_coopmat_f16(instance, d)) return;
  f.coopmat = true;
  en.chain(en.cm, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
}

// The portable tensor-core product (mc.comp MC_KHR), where the driver offers a fragment it tiles;
// its shaders declare the Vulkan memory model.
// Before enable_coopmat(): f.coopmat still says whether tensor cores are wanted at all.
void enable_khr_coopmat(VkInstance instance, VkPhysicalDevice d, EnabledFeatures& en,
                        DeviceFeatures& f) {
  const bool wanted = f.coopmat;
  f.khr_m = f.khr_n = f.khr_k = 0;
  if (!wanted || !f.float16 || !f.subgroup_shuffle ||
      !has_device_extension(d, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    return;
  }
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  query(d, f12);
  query(d, en.khr_cm);
  en.khr_cm.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  const auto frag = khr_fragment(instance, d, f.subgroup_size);
  if (!en.khr_cm.cooperativeMatrix || !f12.vulkanMemoryModel || frag[0] == 0) return;
  f.khr_m = frag[0];
  f.khr_n = frag[1];
  f.khr_k = frag[2];
  en.e12.vulkanMemoryModel = VK_TRUE;
  en.chain(en.khr_cm, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
}

// Integer dot products for the int8-input decode product.
void enable_int_dot(VkPhysicalDevice d, EnabledFeatures& en, DeviceFeatures& f) {
  const bool wanted = f.int_dot;
  f.int_dot = f.int_dot_fast = false;
  if (!wanted || !has_device_extension(d, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) return;
  query(d, en.idp);
  if (!en.idp.shaderIntegerDotProduct) return;
  VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR ip{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
  VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  pp.pNext = &ip;
  vkGetPhysicalDeviceProperties2(d, &pp);
  f.int_dot = true;
  f.int_dot_fast = ip.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE;
  en.chain(en.idp, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
}

// The driver's statistics of each pipeline (kernel tuning: registers, spills).
void enable_pipeline_stats(VkPhysicalDevice d, EnabledFeatures& en, DeviceFeatures& f) {
  if (!traces("pipelines") ||
      !has_device_extension(d, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
    return;
  }
  query(d, en.pe);
  if (!en.pe.pipelineExecutableInfo) return;
  f.pipeline_stats = true;
  en.chain(en.pe, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
}

}  // namespace

bool traces(std::string_view what) {
  const char* v = std::getenv("RWKVD_VK_TRACE");
  if (v == nullptr) return false;
  std::string_view list(v);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == what) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

uint64_t Device::validation_errors() {
  return g_validation_errors.load();
}
bool Device::validation_enabled() {
  return g_validation_enabled.load();
}

Device::Device(const TuningPatch& patch) {
  create_instance(env_is("RWKVD_VK_VALIDATION", "1"));
  try {
    phys_ = choose_device(instance_);
    vkGetPhysicalDeviceProperties(phys_, &props_);
    vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
    tuning_ =
        choose_tuning(device_class(props_.vendorID, props_.deviceType, props_.deviceName), patch);
    choose_queue_families();
    create_device();
  } catch (...) {
    destroy_instance();
    throw;
  }
}

void Device::create_instance(bool validate) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "rwkvd";
  app.apiVersion = VK_API_VERSION_1_2;
  std::vector<const char*> layers, exts;
  if (validate) {
    if (!has_layer("VK_LAYER_KHRONOS_validation")) {
      throw EngineError("vulkan: RWKVD_VK_VALIDATION=1 but VK_LAYER_KHRONOS_validation is absent");
    }
    layers.push_back("VK_LAYER_KHRONOS_validation");
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  ici.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ici.ppEnabledExtensionNames = exts.data();
  RWKVD_VK(vkCreateInstance(&ici, nullptr, &instance_));
  if (!validate) return;
  VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = on_debug_message;
  auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
  const VkResult r = create == nullptr ? VK_ERROR_EXTENSION_NOT_PRESENT
                                       : create(instance_, &mci, nullptr, &messenger_);
  if (r != VK_SUCCESS) {
    destroy_instance();
    throw EngineError("vulkan: the validation messenger could not be made");
  }
  g_validation_enabled = true;
}

void Device::destroy_instance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  vkDestroyInstance(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}

void Device::choose_queue_families() {
  // A compute queue; prefer a family without graphics (often the less contended one).
  uint32_t nf = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nf, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nf);
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nf, fams.data());
  int best = -1;
  for (uint32_t i = 0; i < nf; ++i) {
    if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || (!(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                     (fams[best].queueFlags & VK_QUEUE_GRAPHICS_BIT))) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) throw EngineError("vulkan: device has no compute queue");
  family_ = static_cast<uint32_t>(best);
  // A transfer-only family (a copy engine) for the weight upload, so that its copies do not
  // queue behind (or in front of) the forward's dispatches.
  transfer_family_ = family_;
  if (!tuning_.transfer_queue) return;
  for (uint32_t i = 0; i < nf; ++i) {
    const VkQueueFlags f = fams[i].queueFlags;
    if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT))) {
      transfer_family_ = i;
      return;
    }
  }
}

void Device::create_device() {
  EnabledFeatures en;
  DeviceFeatures f = core_features(phys_, en);
  f = allowed_features(f, tuning_);
  enable_khr_coopmat(instance_, phys_, en, f);
  enable_coopmat(instance_, phys_, en, f);
  enable_int_dot(phys_, en, f);
  enable_pipeline_stats(phys_, en, f);
  profile_ = make_device_profile(props_, f);
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qci[2]{{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO},
                                 {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}};
  for (VkDeviceQueueCreateInfo& q : qci) {
    q.queueCount = 1;
    q.pQueuePriorities = &prio;
  }
  qci[0].queueFamilyIndex = family_;
  qci[1].queueFamilyIndex = transfer_family_;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &en.e2;
  dci.queueCreateInfoCount = transfer_family_ != family_ ? 2 : 1;
  dci.pQueueCreateInfos = qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(en.exts.size());
  dci.ppEnabledExtensionNames = en.exts.data();
  RWKVD_VK(vkCreateDevice(phys_, &dci, nullptr, &dev_));
  vkGetDeviceQueue(dev_, family_, 0, &queue_);
  vkGetDeviceQueue(dev_, transfer_family_, 0, &transfer_queue_);
}

Device::~Device() {
  if (dev_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(dev_);
    vkDestroyDevice(dev_, nullptr);
  }
  destroy_instance();
}

uint32_t Device::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                             VkMemoryPropertyFlags preferred) const {
  int fallback = -1;
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = mem_props_.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return i;
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  if (fallback < 0) throw EngineError("vulkan: no suitable memory type");
  return static_cast<uint32_t>(fallback);
}

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    default:
      return "VkResult(other)";
  }
}

}  // namespace rwkvd::engine::vk
