// VK_KHR_cooperative_matrix, the extension tensor-core kernels written with
// GL_KHR_cooperative_matrix need: the shapes the device offers (and VK_NV_cooperative_matrix2's
// features where offered), and a tiled product through it (tests/vk/shaders/coopmat_product.comp)
// for every fp16 shape, checked exactly against the CPU; where VK_NV_cooperative_matrix2 offers
// flexible dimensions, the same product in larger fragments (16x16x16, the NVIDIA kernels' shape,
// among them). The test makes its own device with the extensions' features enabled, apart from the
// engine's (engine/vk/device.h), which does not use them yet.
//
// A device without the extension skips, as Debian 12's lavapipe does; under
// scripts/install-coopmat-lavapipe's wrapper (lavapipe of Debian 13's backported Mesa, which
// offers it) ctest sets RWKVD_REQUIRE_COOPMAT=1, and a missing extension or shape fails instead.
// No validation layer: Debian 12's (1.3.239) predates the extension.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/quant/half.h"
#include "engine/vk/khr_coopmat.h"
#include "shaders/shaders.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::fp16_to_fp32;
using engine::fp32_to_fp16;

// Skips the test with `why`, or fails it when RWKVD_REQUIRE_COOPMAT=1.
#define RWKVD_SKIP_OR_FAIL(why)                                                   \
  do {                                                                            \
    const std::string rwkvd_why_ = (why);                                         \
    if (coopmat_required()) FAIL() << rwkvd_why_ << " (RWKVD_REQUIRE_COOPMAT=1)"; \
    GTEST_SKIP() << rwkvd_why_;                                                   \
  } while (0)

#define RWKVD_VK_OK(call) ASSERT_EQ((call), VK_SUCCESS) << #call

const char* component_name(VkComponentTypeKHR t) {
  switch (t) {
    case VK_COMPONENT_TYPE_FLOAT16_KHR:
      return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_KHR:
      return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_KHR:
      return "f64";
    case VK_COMPONENT_TYPE_SINT8_KHR:
      return "i8";
    case VK_COMPONENT_TYPE_SINT16_KHR:
      return "i16";
    case VK_COMPONENT_TYPE_SINT32_KHR:
      return "i32";
    case VK_COMPONENT_TYPE_SINT64_KHR:
      return "i64";
    case VK_COMPONENT_TYPE_UINT8_KHR:
      return "u8";
    case VK_COMPONENT_TYPE_UINT16_KHR:
      return "u16";
    case VK_COMPONENT_TYPE_UINT32_KHR:
      return "u32";
    case VK_COMPONENT_TYPE_UINT64_KHR:
      return "u64";
    case VK_COMPONENT_TYPE_BFLOAT16_KHR:
      return "bf16";
    default:
      return "other";
  }
}

const char* scope_name(VkScopeKHR s) {
  switch (s) {
    case VK_SCOPE_DEVICE_KHR:
      return "device";
    case VK_SCOPE_WORKGROUP_KHR:
      return "workgroup";
    case VK_SCOPE_SUBGROUP_KHR:
      return "subgroup";
    case VK_SCOPE_QUEUE_FAMILY_KHR:
      return "queue family";
    default:
      return "other";
  }
}

std::string shape_text(const VkCooperativeMatrixPropertiesKHR& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%ux%ux%u %s x %s + %s -> %s%s, %s scope", s.MSize, s.NSize,
                s.KSize, component_name(s.AType), component_name(s.BType), component_name(s.CType),
                component_name(s.ResultType), s.saturatingAccumulation ? " (saturating)" : "",
                scope_name(s.scope));
  return buf;
}

bool has_extension(VkPhysicalDevice d, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(d, nullptr, &n, exts.data());
  for (const VkExtensionProperties& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

// A compute device with VK_KHR_cooperative_matrix and the features coopmat_product.comp needs
// (fp16 arithmetic and storage, the Vulkan memory model its SPIR-V declares), and what it offers of
// the extension. `why` says what is missing when device is null.
struct CoopmatDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t family = 0;
  std::string name;
  std::string why;
  uint32_t subgroup_size = 0;
  bool lavapipe = false;
  VkPhysicalDeviceMemoryProperties mem{};
  std::vector<VkCooperativeMatrixPropertiesKHR> shapes;
  bool nv2 = false;  // VK_NV_cooperative_matrix2 offered: its features and flexible shapes
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV nv2_features{};
  uint32_t nv2_max_dimension = 0;  // of a flexible fragment
  std::vector<VkCooperativeMatrixFlexibleDimensionsPropertiesNV> flexible;
  bool flexible_enabled = false;  // cooperativeMatrixFlexibleDimensions, enabled on `device`

  CoopmatDevice() { open(); }
  ~CoopmatDevice() {
    if (device != VK_NULL_HANDLE) vkDestroyDevice(device, nullptr);
    if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
  }
  CoopmatDevice(const CoopmatDevice&) = delete;
  CoopmatDevice& operator=(const CoopmatDevice&) = delete;

  template <class F>
  F proc(const char* fn) const {
    return reinterpret_cast<F>(vkGetInstanceProcAddr(instance, fn));
  }

  void open() {
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "rwkvd khr_coopmat_test";
    app.apiVersion = VK_API_VERSION_1_3;
    VkInstanceCreateInfo ici{};
    ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ici.pApplicationInfo = &app;
    if (vkCreateInstance(&ici, nullptr, &instance) != VK_SUCCESS) {
      instance = VK_NULL_HANDLE;
      why = "no Vulkan instance";
      return;
    }
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> devs(n);
    vkEnumeratePhysicalDevices(instance, &n, devs.data());
    for (VkPhysicalDevice d : devs) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(d, &p);
      if (p.apiVersion >= VK_API_VERSION_1_2 &&
          has_extension(d, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
        phys = d;
        name = p.deviceName;
        break;
      }
    }
    if (phys == VK_NULL_HANDLE) {
      why = "no Vulkan device offers " VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME
            " (Debian 12's lavapipe does not: run under the wrapper that "
            "scripts/install-coopmat-lavapipe installs)";
      return;
    }
    query_shapes();
    create_device();
  }

  void query_shapes() {
    auto get = proc<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
        "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (get != nullptr && get(phys, &n, nullptr) == VK_SUCCESS) {
      VkCooperativeMatrixPropertiesKHR blank{};
      blank.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
      shapes.assign(n, blank);
      if (get(phys, &n, shapes.data()) != VK_SUCCESS) n = 0;
      shapes.resize(n);
    }
    nv2 = has_extension(phys, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
    if (!nv2) return;
    nv2_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &nv2_features;
    vkGetPhysicalDeviceFeatures2(phys, &f2);
    nv2_features.pNext = nullptr;
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV nv2_props{};
    nv2_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &nv2_props;
    vkGetPhysicalDeviceProperties2(phys, &p2);
    nv2_max_dimension = nv2_props.cooperativeMatrixFlexibleDimensionsMaxDimension;
    auto flex = proc<PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV>(
        "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    n = 0;
    if (flex != nullptr && flex(phys, &n, nullptr) == VK_SUCCESS) {
      VkCooperativeMatrixFlexibleDimensionsPropertiesNV blank{};
      blank.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
      flexible.assign(n, blank);
      if (flex(phys, &n, flexible.data()) != VK_SUCCESS) n = 0;
      flexible.resize(n);
    }
  }

  void create_device() {
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm{};
    cm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f12.pNext = &cm;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(phys, &f2);
    if (!cm.cooperativeMatrix || !f12.shaderFloat16 || !f12.vulkanMemoryModel ||
        !f11.storageBuffer16BitAccess) {
      why = name + " lacks cooperativeMatrix, shaderFloat16, vulkanMemoryModel or " +
            "storageBuffer16BitAccess";
      return;
    }
    // Only what the shader needs: the rest of the queried structures is switched off.
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR en_cm{};
    en_cm.sType = cm.sType;
    en_cm.cooperativeMatrix = VK_TRUE;
    VkPhysicalDeviceVulkan12Features en12{};
    en12.sType = f12.sType;
    en12.pNext = &en_cm;
    en12.shaderFloat16 = en12.vulkanMemoryModel = VK_TRUE;
    VkPhysicalDeviceVulkan11Features en11{};
    en11.sType = f11.sType;
    en11.pNext = &en12;
    en11.storageBuffer16BitAccess = VK_TRUE;
    VkPhysicalDeviceFeatures2 en2{};
    en2.sType = f2.sType;
    en2.pNext = &en11;
    std::vector<const char*> exts = {VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME};
    // Flexible dimensions need no SPIR-V capability: the same shader, larger fragments.
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV en_nv2{};
    en_nv2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
    if (nv2 && nv2_features.cooperativeMatrixFlexibleDimensions) {
      en_nv2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
      en_cm.pNext = &en_nv2;
      exts.push_back(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
      flexible_enabled = true;
    }

    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, nullptr);
    std::vector<VkQueueFamilyProperties> fams(nf);
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, fams.data());
    family = nf;
    for (uint32_t i = 0; i < nf && family == nf; ++i) {
      if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    }
    if (family == nf) {
      why = name + " has no compute queue";
      return;
    }
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.pNext = &en2;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
    dci.ppEnabledExtensionNames = exts.data();
    if (const VkResult r = vkCreateDevice(phys, &dci, nullptr, &device); r != VK_SUCCESS) {
      device = VK_NULL_HANDLE;
      why = name + ": vkCreateDevice failed (" + std::to_string(r) + ")";
      return;
    }
    vkGetDeviceQueue(device, family, 0, &queue);
    VkPhysicalDeviceDriverProperties driver{};
    driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    VkPhysicalDeviceSubgroupProperties sg{};
    sg.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    sg.pNext = &driver;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sg;
    vkGetPhysicalDeviceProperties2(phys, &p2);
    subgroup_size = sg.subgroupSize;
    lavapipe = driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE;
    vkGetPhysicalDeviceMemoryProperties(phys, &mem);
  }
};

// One device for the suite (a driver loaded once).
CoopmatDevice& coopmat_device() {
  static CoopmatDevice d;
  return d;
}

// Why `d` cannot run cooperative-matrix shaders, or empty. Lavapipe (Mesa 26.1) lowers an 8x8
// fragment to a row a lane and assumes 8 lanes: in wider subgroups (LP_NATIVE_VECTOR_WIDTH 512 or
// 1024) its shader compiler writes past its arrays and aborts the process, so those are refused
// before any pipeline is made.
std::string unusable(const CoopmatDevice& d) {
  if (d.device == VK_NULL_HANDLE) return d.why;
  if (d.lavapipe && d.subgroup_size != 8) {
    return d.name + ": lavapipe's cooperative matrices need subgroups of 8, not " +
           std::to_string(d.subgroup_size) + " (LP_NATIVE_VECTOR_WIDTH=256)";
  }
  return "";
}

// A host-visible, coherent storage buffer, mapped for its life.
struct HostBuffer {
  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* data = nullptr;

  HostBuffer(const CoopmatDevice& d, VkDeviceSize bytes) : device(d.device) {
    VkBufferCreateInfo bci{};
    bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (vkCreateBuffer(device, &bci, nullptr, &buffer) != VK_SUCCESS) return;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, buffer, &req);
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < d.mem.memoryTypeCount; ++i) {
      if ((req.memoryTypeBits & (1u << i)) && (d.mem.memoryTypes[i].propertyFlags & want) == want) {
        VkMemoryAllocateInfo mai{};
        mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
        mai.allocationSize = req.size;
        mai.memoryTypeIndex = i;
        if (vkAllocateMemory(device, &mai, nullptr, &memory) != VK_SUCCESS) return;
        if (vkBindBufferMemory(device, buffer, memory, 0) != VK_SUCCESS ||
            vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &data) != VK_SUCCESS) {
          data = nullptr;
          return;
        }
        std::memset(data, 0, bytes);
        return;
      }
    }
  }
  ~HostBuffer() {
    if (memory != VK_NULL_HANDLE) vkFreeMemory(device, memory, nullptr);
    if (buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer, nullptr);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
};

std::span<const uint32_t> test_shader(std::string_view name) {
  for (const shaders::Shader& s : shaders::test_only()) {
    if (s.name == name) return s.words;
  }
  return {};
}

// Every Vulkan object of one dispatch of coopmat_product.comp, destroyed in reverse.
struct ProductRun {
  VkDevice device;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkCommandPool cmd_pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  explicit ProductRun(VkDevice d) : device(d) {}
  ~ProductRun() {
    if (fence != VK_NULL_HANDLE) vkDestroyFence(device, fence, nullptr);
    if (cmd_pool != VK_NULL_HANDLE) vkDestroyCommandPool(device, cmd_pool, nullptr);
    if (pool != VK_NULL_HANDLE) vkDestroyDescriptorPool(device, pool, nullptr);
    if (pipeline != VK_NULL_HANDLE) vkDestroyPipeline(device, pipeline, nullptr);
    if (layout != VK_NULL_HANDLE) vkDestroyPipelineLayout(device, layout, nullptr);
    if (set_layout != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device, set_layout, nullptr);
    if (module != VK_NULL_HANDLE) vkDestroyShaderModule(device, module, nullptr);
  }
  ProductRun(const ProductRun&) = delete;
  ProductRun& operator=(const ProductRun&) = delete;
};

struct Sizes {
  uint32_t rows, cols, depth;
};

// Runs `shader` (coopmat_product.comp) with the fragment of `shape` on fp16 A (rows x depth) and
// B (depth x cols), leaving C (rows x cols, `c_bytes` an element) in `c`.
void run_product(const CoopmatDevice& d, std::string_view shader,
                 const VkCooperativeMatrixPropertiesKHR& shape, Sizes n,
                 const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, size_t c_bytes,
                 std::vector<std::byte>& c) {
  const std::span<const uint32_t> words = test_shader(shader);
  ASSERT_FALSE(words.empty()) << "no test shader " << shader;
  HostBuffer ba(d, a.size() * 2), bb(d, b.size() * 2), bc(d, size_t{n.rows} * n.cols * c_bytes);
  ASSERT_TRUE(ba.data && bb.data && bc.data) << "host-visible storage buffers";
  std::memcpy(ba.data, a.data(), a.size() * 2);
  std::memcpy(bb.data, b.data(), b.size() * 2);

  ProductRun r(d.device);
  VkShaderModuleCreateInfo smci{};
  smci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  smci.codeSize = words.size() * 4;
  smci.pCode = words.data();
  RWKVD_VK_OK(vkCreateShaderModule(d.device, &smci, nullptr, &r.module));
  VkDescriptorSetLayoutBinding binds[3]{};
  for (uint32_t i = 0; i < 3; ++i) {
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dslci{};
  dslci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dslci.bindingCount = 3;
  dslci.pBindings = binds;
  RWKVD_VK_OK(vkCreateDescriptorSetLayout(d.device, &dslci, nullptr, &r.set_layout));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Sizes)};
  VkPipelineLayoutCreateInfo plci{};
  plci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &r.set_layout;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &pcr;
  RWKVD_VK_OK(vkCreatePipelineLayout(d.device, &plci, nullptr, &r.layout));

  // One subgroup a workgroup (the matrices' scope), the fragment M x N x K.
  const uint32_t spec[4] = {d.subgroup_size, shape.MSize, shape.NSize, shape.KSize};
  VkSpecializationMapEntry entries[4];
  for (uint32_t i = 0; i < 4; ++i) entries[i] = {i, i * 4, 4};
  VkSpecializationInfo si{4, entries, sizeof spec, spec};
  VkComputePipelineCreateInfo cpci{};
  cpci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpci.stage.module = r.module;
  cpci.stage.pName = "main";
  cpci.stage.pSpecializationInfo = &si;
  cpci.layout = r.layout;
  RWKVD_VK_OK(vkCreateComputePipelines(d.device, VK_NULL_HANDLE, 1, &cpci, nullptr, &r.pipeline));

  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
  VkDescriptorPoolCreateInfo dpci{};
  dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpci.maxSets = 1;
  dpci.poolSizeCount = 1;
  dpci.pPoolSizes = &ps;
  RWKVD_VK_OK(vkCreateDescriptorPool(d.device, &dpci, nullptr, &r.pool));
  VkDescriptorSetAllocateInfo dsai{};
  dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dsai.descriptorPool = r.pool;
  dsai.descriptorSetCount = 1;
  dsai.pSetLayouts = &r.set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  RWKVD_VK_OK(vkAllocateDescriptorSets(d.device, &dsai, &set));
  VkDescriptorBufferInfo infos[3] = {
      {ba.buffer, 0, VK_WHOLE_SIZE}, {bb.buffer, 0, VK_WHOLE_SIZE}, {bc.buffer, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet writes[3]{};
  for (uint32_t i = 0; i < 3; ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(d.device, 3, writes, 0, nullptr);

  VkCommandPoolCreateInfo cpi{};
  cpi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cpi.queueFamilyIndex = d.family;
  RWKVD_VK_OK(vkCreateCommandPool(d.device, &cpi, nullptr, &r.cmd_pool));
  VkCommandBufferAllocateInfo cbai{};
  cbai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cbai.commandPool = r.cmd_pool;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  RWKVD_VK_OK(vkAllocateCommandBuffers(d.device, &cbai, &cb));
  VkCommandBufferBeginInfo cbbi{};
  cbbi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  cbbi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  RWKVD_VK_OK(vkBeginCommandBuffer(cb, &cbbi));
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, r.pipeline);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, r.layout, 0, 1, &set, 0, nullptr);
  vkCmdPushConstants(cb, r.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof n, &n);
  vkCmdDispatch(cb, n.cols / shape.NSize, n.rows / shape.MSize, 1);
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &mb, 0, nullptr, 0, nullptr);
  RWKVD_VK_OK(vkEndCommandBuffer(cb));
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  RWKVD_VK_OK(vkCreateFence(d.device, &fci, nullptr, &r.fence));
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cb;
  RWKVD_VK_OK(vkQueueSubmit(d.queue, 1, &submit, r.fence));
  RWKVD_VK_OK(vkWaitForFences(d.device, 1, &r.fence, VK_TRUE, UINT64_MAX));
  c.resize(size_t{n.rows} * n.cols * c_bytes);
  std::memcpy(c.data(), bc.data, c.size());
}

// The shapes of `d` multiplying fp16 A and B into `acc` (C and the result), per subgroup.
std::vector<VkCooperativeMatrixPropertiesKHR> fp16_shapes(const CoopmatDevice& d,
                                                          VkComponentTypeKHR acc) {
  std::vector<VkCooperativeMatrixPropertiesKHR> out;
  for (const VkCooperativeMatrixPropertiesKHR& s : d.shapes) {
    if (s.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && s.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
        s.CType == acc && s.ResultType == acc && s.scope == VK_SCOPE_SUBGROUP_KHR &&
        !s.saturatingAccumulation) {
      out.push_back(s);
    }
  }
  return out;
}

// A product of 2 x 3 fragments of C, 4 of depth, on values drawn from {-q, ..., q} / scale: all
// exact in fp16, as is every product and partial sum in the accumulator (the callers' bounds), so
// any order of summation gives the CPU's result exactly and the comparison has no tolerance.
void check_product(std::string_view shader, const VkCooperativeMatrixPropertiesKHR& shape,
                   bool acc_f16, int q, float scale) {
  const CoopmatDevice& d = coopmat_device();
  const Sizes n{2 * shape.MSize, 3 * shape.NSize, 4 * shape.KSize};
  std::mt19937 rng(shape.MSize * 10007 + shape.NSize * 101 + shape.KSize);
  std::uniform_int_distribution<int> pick(-q, q);
  std::vector<float> a(size_t{n.rows} * n.depth), b(size_t{n.depth} * n.cols);
  std::vector<uint16_t> ha(a.size()), hb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ha[i] = fp32_to_fp16(a[i] = pick(rng) / scale);
  for (size_t i = 0; i < b.size(); ++i) hb[i] = fp32_to_fp16(b[i] = pick(rng) / scale);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(fp16_to_fp32(ha[i]), a[i]) << "fp16 inputs";
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(fp16_to_fp32(hb[i]), b[i]) << "fp16 inputs";

  std::vector<std::byte> c;
  ASSERT_NO_FATAL_FAILURE(run_product(d, shader, shape, n, ha, hb, acc_f16 ? 2 : 4, c));
  int wrong = 0;
  for (uint32_t i = 0; i < n.rows; ++i) {
    for (uint32_t j = 0; j < n.cols; ++j) {
      double want = 0;
      for (uint32_t k = 0; k < n.depth; ++k) {
        want += double{a[size_t{i} * n.depth + k]} * b[size_t{k} * n.cols + j];
      }
      const size_t at = size_t{i} * n.cols + j;
      float got;
      if (acc_f16) {
        uint16_t h;
        std::memcpy(&h, c.data() + at * 2, 2);
        got = fp16_to_fp32(h);
      } else {
        std::memcpy(&got, c.data() + at * 4, 4);
      }
      if (got != static_cast<float>(want) && ++wrong <= 8) {
        ADD_FAILURE() << shape_text(shape) << ": C[" << i << "][" << j << "] = " << got << ", want "
                      << want;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << shape_text(shape) << ": " << wrong << " of " << n.rows * n.cols
                      << " elements differ (" << n.rows << "x" << n.depth << " by " << n.depth
                      << "x" << n.cols << ")";
  if (wrong == 0) {
    std::printf("  %s: %ux%u by %ux%u, exact\n", shape_text(shape).c_str(), n.rows, n.depth,
                n.depth, n.cols);
  }
}

TEST(VkKhrCoopmat, ListsShapes) {
  const CoopmatDevice& d = coopmat_device();
  if (d.phys == VK_NULL_HANDLE) RWKVD_SKIP_OR_FAIL(d.why);
  std::printf("%s: %s, subgroups of %u, %zu shapes\n", d.name.c_str(),
              VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME, d.subgroup_size, d.shapes.size());
  for (const VkCooperativeMatrixPropertiesKHR& s : d.shapes) {
    std::printf("  %s\n", shape_text(s).c_str());
  }
  if (d.nv2) {
    const VkPhysicalDeviceCooperativeMatrix2FeaturesNV& f = d.nv2_features;
    std::printf(
        "%s: %s: workgroup scope %d, flexible dimensions %d, reductions %d, conversions %d, "
        "per-element operations %d, tensor addressing %d, block loads %d; %zu flexible shapes\n",
        d.name.c_str(), VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME,
        f.cooperativeMatrixWorkgroupScope, f.cooperativeMatrixFlexibleDimensions,
        f.cooperativeMatrixReductions, f.cooperativeMatrixConversions,
        f.cooperativeMatrixPerElementOperations, f.cooperativeMatrixTensorAddressing,
        f.cooperativeMatrixBlockLoads, d.flexible.size());
    for (const VkCooperativeMatrixFlexibleDimensionsPropertiesNV& s : d.flexible) {
      std::printf("  granularity %ux%ux%u %s x %s + %s -> %s, %s scope, %u invocations\n",
                  s.MGranularity, s.NGranularity, s.KGranularity, component_name(s.AType),
                  component_name(s.BType), component_name(s.CType), component_name(s.ResultType),
                  scope_name(s.scope), s.workgroupInvocations);
    }
  } else {
    std::printf("%s: no %s\n", d.name.c_str(), VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
  }
  EXPECT_FALSE(d.shapes.empty()) << d.name << " offers the extension but no shape";
}

TEST(VkKhrCoopmat, Fp16ProductIntoFp32IsExact) {
  const CoopmatDevice& d = coopmat_device();
  if (const std::string why = unusable(d); !why.empty()) RWKVD_SKIP_OR_FAIL(why);
  const std::vector<VkCooperativeMatrixPropertiesKHR> shapes =
      fp16_shapes(d, VK_COMPONENT_TYPE_FLOAT32_KHR);
  if (shapes.empty()) RWKVD_SKIP_OR_FAIL(d.name + " has no f16 x f16 -> f32 subgroup shape");
  for (const VkCooperativeMatrixPropertiesKHR& s : shapes) {
    SCOPED_TRACE(shape_text(s));
    // Eighths up to 2: products are multiples of 1/64 up to 4, and sums of up to 4K of them
    // (K <= 1024) stay below 2^14 with 6 fraction bits: within fp32's 24 bits.
    ASSERT_LE(s.KSize, 1024u);
    check_product("coopmat_product_f32", s, false, 16, 8.0f);
  }
}

TEST(VkKhrCoopmat, Fp16ProductIntoFp16IsExact) {
  const CoopmatDevice& d = coopmat_device();
  if (const std::string why = unusable(d); !why.empty()) RWKVD_SKIP_OR_FAIL(why);
  const std::vector<VkCooperativeMatrixPropertiesKHR> shapes =
      fp16_shapes(d, VK_COMPONENT_TYPE_FLOAT16_KHR);
  // Not every device accumulates in fp16 (the product's kernels never do): no failure without.
  if (shapes.empty()) GTEST_SKIP() << d.name << " has no f16 x f16 -> f16 subgroup shape";
  for (const VkCooperativeMatrixPropertiesKHR& s : shapes) {
    SCOPED_TRACE(shape_text(s));
    // Integers up to q with depth * q^2 <= 2048: every partial sum is an integer fp16 holds.
    const int q = static_cast<int>(std::sqrt(2048.0 / (4 * s.KSize)));
    ASSERT_GE(q, 1) << "depth too large for exact fp16 sums";
    check_product("coopmat_product_f16", s, true, q, 1.0f);
  }
}

TEST(VkKhrCoopmat, FlexibleFp16ProductsThroughNvCoopmat2AreExact) {
  const CoopmatDevice& d = coopmat_device();
  if (const std::string why = unusable(d); !why.empty()) RWKVD_SKIP_OR_FAIL(why);
  // An extension of NVIDIA's that few devices offer: its absence is no failure.
  if (!d.flexible_enabled) {
    GTEST_SKIP() << d.name << " offers no flexible dimensions (VK_NV_cooperative_matrix2)";
  }
  int ran = 0;
  for (const VkCooperativeMatrixFlexibleDimensionsPropertiesNV& f : d.flexible) {
    const bool into_f32 =
        f.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && f.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR;
    if (f.AType != VK_COMPONENT_TYPE_FLOAT16_KHR || f.BType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
        !into_f32 || f.scope != VK_SCOPE_SUBGROUP_KHR || f.saturatingAccumulation) {
      continue;
    }
    // Multiples of the granularity: square and twice it (16x16x16 on lavapipe), and uneven.
    const uint32_t m = f.MGranularity, n = f.NGranularity, k = f.KGranularity;
    const std::array<uint32_t, 3> fragments[] = {{2 * m, 2 * n, 2 * k}, {3 * m, n, 4 * k}};
    for (const std::array<uint32_t, 3>& mnk : fragments) {
      if (d.nv2_max_dimension != 0 && std::max({mnk[0], mnk[1], mnk[2]}) > d.nv2_max_dimension) {
        continue;
      }
      VkCooperativeMatrixPropertiesKHR s{};
      s.MSize = mnk[0];
      s.NSize = mnk[1];
      s.KSize = mnk[2];
      s.AType = s.BType = VK_COMPONENT_TYPE_FLOAT16_KHR;
      s.CType = s.ResultType = VK_COMPONENT_TYPE_FLOAT32_KHR;
      s.scope = VK_SCOPE_SUBGROUP_KHR;
      SCOPED_TRACE(shape_text(s));
      ASSERT_LE(s.KSize, 1024u);  // the bound of Fp16ProductIntoFp32IsExact
      check_product("coopmat_product_f32", s, false, 16, 8.0f);
      ++ran;
    }
  }
  if (ran == 0) RWKVD_SKIP_OR_FAIL(d.name + " has no flexible f16 x f16 -> f32 subgroup shape");
}

}  // namespace
}  // namespace rwkvd::test
