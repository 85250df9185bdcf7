#include "engine/vk/pipelines.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "engine/vk/vk_check.h"
#include "shaders/shaders.h"

namespace rwkvd::engine::vk {
namespace {

// Where the VkPipelineCache lives between runs: $RWKVD_VK_PIPELINE_CACHE ("0" or "off": nowhere),
// else $XDG_CACHE_HOME/rwkvd (or ~/.cache/rwkvd) per device and driver version. A fresh process
// then skips the driver's shader compilation (seconds on some drivers).
std::string cache_path(const VkPhysicalDeviceProperties& props) {
  if (const char* p = std::getenv("RWKVD_VK_PIPELINE_CACHE"); p != nullptr && *p != '\0') {
    const std::string v(p);
    return v == "0" || v == "off" ? std::string() : v;
  }
  std::filesystem::path dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    dir = x;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    dir = std::filesystem::path(h) / ".cache";
  } else {
    return {};
  }
  char name[96];
  std::snprintf(name, sizeof name, "pipelines-%04x-%04x-%08x.bin", props.vendorID, props.deviceID,
                props.driverVersion);
  return (dir / "rwkvd" / name).string();
}

std::vector<char> read_cache_file(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Written beside and renamed over, so concurrent processes never read a half-written file.
void write_cache_file(const std::string& path, const std::vector<char>& blob) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;  // a cache that cannot be written only costs the next start its compile time
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

// A pipeline's specialization constants as "a,b,c", for the log lines below.
std::string spec_text(const std::vector<uint32_t>& spec) {
  std::string out;
  for (const uint32_t v : spec) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// One stderr line per executable of pipeline p: the driver's statistics (RWKVD_VK_TRACE=pipelines).
void print_statistics(const Device& dev, VkPipeline p, const Pipelines::Key& key) {
  const auto props = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(dev.device(), "vkGetPipelineExecutablePropertiesKHR"));
  const auto stats = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(dev.device(), "vkGetPipelineExecutableStatisticsKHR"));
  if (props == nullptr || stats == nullptr) return;
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = p;
  uint32_t n = 0;
  if (props(dev.device(), &pi, &n, nullptr) != VK_SUCCESS) return;
  const std::string spec = spec_text(key.second);
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p;
    ei.executableIndex = e;
    uint32_t m = 0;
    if (stats(dev.device(), &ei, &m, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> st(
        m, VkPipelineExecutableStatisticKHR{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (stats(dev.device(), &ei, &m, st.data()) != VK_SUCCESS) continue;
    std::string line = "rwkvd: pipeline " + key.first + " {" + spec + "}:";
    for (const VkPipelineExecutableStatisticKHR& x : st) {
      line += std::string(" ") + x.name + "=";
      switch (x.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          line += x.value.b32 ? "true" : "false";
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          line += std::to_string(x.value.i64);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          line += std::to_string(x.value.u64);
          break;
        default:
          line += std::to_string(x.value.f64);
      }
      line += ";";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace

Pipelines::Pipelines(Device& dev) : dev_(dev) {
  VkDescriptorSetLayoutBinding b[5]{};
  for (uint32_t i = 0; i < 5; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = i == 4 ? kWeightBindings : 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo lci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  lci.bindingCount = 5;
  lci.pBindings = b;
  RWKVD_VK(vkCreateDescriptorSetLayout(dev_.device(), &lci, nullptr, &set_layout_));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
  VkPipelineLayoutCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pci.setLayoutCount = 1;
  pci.pSetLayouts = &set_layout_;
  pci.pushConstantRangeCount = 1;
  pci.pPushConstantRanges = &pcr;
  RWKVD_VK(vkCreatePipelineLayout(dev_.device(), &pci, nullptr, &layout_));
  cache_path_ = cache_path(dev_.props());
  const std::vector<char> blob = read_cache_file(cache_path_);
  VkPipelineCacheCreateInfo cci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  cci.initialDataSize = blob.size();
  cci.pInitialData = blob.empty() ? nullptr : blob.data();
  if (vkCreatePipelineCache(dev_.device(), &cci, nullptr, &cache_) != VK_SUCCESS) {
    cci.initialDataSize = 0;  // a stale or foreign blob: start empty
    cci.pInitialData = nullptr;
    RWKVD_VK(vkCreatePipelineCache(dev_.device(), &cci, nullptr, &cache_));
  }
}

Pipelines::~Pipelines() {
  VkDevice d = dev_.device();
  if (!cache_path_.empty()) {
    size_t n = 0;
    if (vkGetPipelineCacheData(d, cache_, &n, nullptr) == VK_SUCCESS && n > 0) {
      std::vector<char> blob(n);
      if (vkGetPipelineCacheData(d, cache_, &n, blob.data()) == VK_SUCCESS) {
        blob.resize(n);
        write_cache_file(cache_path_, blob);
      }
    }
  }
  for (auto& [key, p] : pipelines_) vkDestroyPipeline(d, p, nullptr);
  vkDestroyPipelineCache(d, cache_, nullptr);
  vkDestroyPipelineLayout(d, layout_, nullptr);
  vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
}

VkPipeline Pipelines::get(const std::string& name, const std::vector<uint32_t>& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  Key key{name, spec};
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  const auto t0 = std::chrono::steady_clock::now();
  const VkPipeline p = create(key);
  if (dev_.features().pipeline_stats) {  // a pipeline prepare() did not make: on the hot path
    const std::string values = spec_text(spec);
    std::fprintf(
        stderr, "rwkvd: pipeline %s {%s} made on first use in %.1f ms\n", name.c_str(),
        values.c_str(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  pipelines_.emplace(std::move(key), p);
  return p;
}

void Pipelines::use_shader(const std::string& name, std::span<const uint32_t> words) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, p] : pipelines_) {
    if (key.first == name) throw EngineError("vk use_shader: " + name + " is in use already");
  }
  replaced_[name] = words;
}

size_t Pipelines::count() {
  std::lock_guard<std::mutex> lock(mu_);
  return pipelines_.size();
}

void Pipelines::prepare(const std::vector<Key>& keys) {
  std::vector<Key> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Key& k : keys) {
      if (!pipelines_.contains(k) && std::find(todo.begin(), todo.end(), k) == todo.end()) {
        todo.push_back(k);
      }
    }
  }
  std::vector<VkPipeline> made(todo.size(), VK_NULL_HANDLE);
  std::atomic<size_t> next{0};
  std::mutex err_mu;
  std::exception_ptr err;
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      try {
        made[i] = create(todo[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!err) err = std::current_exception();
      }
    }
  };
  const size_t n_threads =
      std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < todo.size(); ++i) {
    if (made[i] == VK_NULL_HANDLE) continue;
    if (!pipelines_.emplace(todo[i], made[i]).second)
      vkDestroyPipeline(dev_.device(), made[i], nullptr);
  }
  if (err) std::rethrow_exception(err);
}

VkPipeline Pipelines::create(const Key& key) const {
  const auto& [name, spec] = key;
  const auto replaced = replaced_.find(name);
  const std::span<const uint32_t> words =
      replaced != replaced_.end() ? replaced->second : shaders::find(name);
  VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mci.codeSize = words.size() * 4;
  mci.pCode = words.data();
  VkShaderModule module;
  RWKVD_VK(vkCreateShaderModule(dev_.device(), &mci, nullptr, &module));
  // Constant 15 repeats the workgroup size (constant 0) for code: see shaders/common.glsl.
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4, 4};
  if (!spec.empty()) entries.push_back({15, 0, 4});
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * 4,
                          spec.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  ci.layout = layout_;
  if (dev_.features().pipeline_stats) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline p;
  const VkResult r = vkCreateComputePipelines(dev_.device(), cache_, 1, &ci, nullptr, &p);
  vkDestroyShaderModule(dev_.device(), module, nullptr);
  if (r != VK_SUCCESS) vk_fail(r, ("vkCreateComputePipelines(" + name + ")").c_str());
  if (dev_.features().pipeline_stats) print_statistics(dev_, p, key);
  return p;
}

DescriptorSets::DescriptorSets(Device& dev, VkDescriptorSetLayout layout, uint32_t max_sets)
    : dev_(dev), layout_(layout) {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, max_sets * (4 + kWeightBindings)};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.maxSets = max_sets;
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &size;
  RWKVD_VK(vkCreateDescriptorPool(dev_.device(), &pci, nullptr, &pool_));
}

DescriptorSets::~DescriptorSets() {
  vkDestroyDescriptorPool(dev_.device(), pool_, nullptr);
}

VkDescriptorSet DescriptorSets::make(const SetBindings& b) {
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout_;
  VkDescriptorSet set;
  RWKVD_VK(vkAllocateDescriptorSets(dev_.device(), &ai, &set));
  VkDescriptorBufferInfo info[4 + kWeightBindings];
  const BufferRange* ranges[4] = {&b.meta, &b.act, &b.vecs, &b.state};
  for (int i = 0; i < 4; ++i) info[i] = {ranges[i]->buffer, ranges[i]->offset, ranges[i]->range};
  for (uint32_t i = 0; i < kWeightBindings; ++i) {
    const BufferRange& w = b.weights[i].buffer != VK_NULL_HANDLE ? b.weights[i] : b.weights[0];
    info[4 + i] = {w.buffer, w.offset, w.range};
  }
  VkWriteDescriptorSet writes[5]{};
  for (uint32_t i = 0; i < 5; ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = i == 4 ? kWeightBindings : 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &info[i];
  }
  vkUpdateDescriptorSets(dev_.device(), 5, writes, 0, nullptr);
  return set;
}

}  // namespace rwkvd::engine::vk
