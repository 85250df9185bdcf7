#include "engine/vk/profiler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "engine/error.h"
#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {
namespace {

constexpr uint32_t kCapacity = 1u << 16;
constexpr uint32_t kPerRecording = 48;  // stamps one command buffer may write

}  // namespace

Profiler::Profiler(Device& dev) : dev_(dev) {
  const char* v = std::getenv("RWKVD_VK_PROFILE");
  if (v == nullptr || *v == '\0' || std::string(v) == "0") return;
  if (const std::string_view h = v; h.starts_with("host:")) {
    sink_ = h.substr(5);
    host_only_ = !sink_.empty();
    return;
  }
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(dev.physical(), &n, nullptr);
  std::vector<VkQueueFamilyProperties> fam(n);
  vkGetPhysicalDeviceQueueFamilyProperties(dev.physical(), &n, fam.data());
  const uint32_t bits = fam.at(dev.queue_family()).timestampValidBits;
  if (bits == 0) {
    std::fprintf(stderr, "rwkvd: RWKVD_VK_PROFILE: the queue has no timestamps; not profiling\n");
    return;
  }
  if (bits < 64) valid_mask_ = (uint64_t{1} << bits) - 1;
  ns_per_tick_ = dev.props().limits.timestampPeriod;
  sink_ = v;
  VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = kCapacity;
  RWKVD_VK(vkCreateQueryPool(dev.device(), &qi, nullptr, &pool_));
  capacity_ = kCapacity;
  enabled_ = true;
}

Profiler::~Profiler() {
  if (!records_host()) return;
  const std::string table = report();
  if (sink_ == "1") {
    std::fputs(table.c_str(), stderr);
  } else if (FILE* f = std::fopen(sink_.c_str(), "a"); f != nullptr) {
    std::fputs(table.c_str(), f);
    std::fclose(f);
  }
  if (enabled_) vkDestroyQueryPool(dev_.device(), pool_, nullptr);
}

uint32_t Profiler::allocate(uint32_t n) {
  if (next_ + n > capacity_) return UINT32_MAX;  // out of queries: later recordings go unmeasured
  const uint32_t first = next_;
  next_ += n;
  return first;
}

uint32_t Profiler::begin(VkCommandBuffer cb, uint32_t tokens) {
  if (!enabled_) return UINT32_MAX;
  const uint32_t first = allocate(kPerRecording);
  if (first == UINT32_MAX) return UINT32_MAX;
  vkCmdResetQueryPool(cb, pool_, first, kPerRecording);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, first);
  recordings_.push_back({first, 1, tokens, {}});
  return static_cast<uint32_t>(recordings_.size() - 1);
}

void Profiler::stamp(VkCommandBuffer cb, uint32_t recording, const std::string& label) {
  if (!enabled_ || recording == UINT32_MAX) return;
  Recording& r = recordings_.at(recording);
  if (r.used >= kPerRecording) throw EngineError("profiler: too many dispatches in one recording");
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, r.first + r.used);
  r.labels.push_back(label);
  ++r.used;
}

void Profiler::collect(const std::vector<uint32_t>& recordings) {
  if (!enabled_) return;
  std::vector<uint64_t> ticks(kPerRecording);
  uint32_t tokens = 0;
  for (uint32_t id : recordings) {
    if (id == UINT32_MAX) continue;
    const Recording& r = recordings_.at(id);
    tokens = r.tokens;
    RWKVD_VK(vkGetQueryPoolResults(dev_.device(), pool_, r.first, r.used, r.used * 8, ticks.data(),
                                   8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    for (uint32_t i = 0; i + 1 < r.used; ++i) {
      const uint64_t d = (ticks[i + 1] - ticks[i]) & valid_mask_;
      Total& t = totals_[{r.tokens, r.labels[i]}];
      ++t.calls;
      t.us += static_cast<double>(d) * ns_per_tick_ * 1e-3;
    }
  }
  ++forwards_[tokens];
}

void Profiler::host(uint32_t tokens, const std::string& label, double us) {
  if (!records_host()) return;
  Total& t = host_[{tokens, label}];
  ++t.calls;
  t.us += us;
}

void Profiler::forget(const std::vector<uint32_t>& recordings) {
  for (uint32_t id : recordings) {
    if (id != UINT32_MAX) recordings_.at(id).labels.clear();
  }
}

std::string Profiler::report() const {
  std::ostringstream o;
  if (host_only_) {
    o << "\n## Host time per forward (RWKVD_VK_PROFILE=host; " << dev_.name() << ")\n\n"
      << "| tokens per forward | phase | forwards | us per forward |\n|---:|---|---:|---:|\n";
    char line[256];
    for (const auto& [key, t] : host_) {
      std::snprintf(line, sizeof line, "| %u | %s | %llu | %.2f |\n", key.first, key.second.c_str(),
                    static_cast<unsigned long long>(t.calls), t.us / static_cast<double>(t.calls));
      o << line;
    }
    return o.str();
  }
  o << "\n## GPU time per kernel (RWKVD_VK_PROFILE; " << dev_.name() << ")\n";
  for (const auto& [tokens, forwards] : forwards_) {
    double sum = 0;
    std::vector<std::pair<std::string, Total>> rows;
    for (const auto& [key, t] : totals_) {
      if (key.first != tokens) continue;
      sum += t.us;
      rows.emplace_back(key.second, t);
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
    char line[256];
    std::snprintf(line, sizeof line,
                  "\n%u token(s) per forward, %llu forwards, %.1f us per forward\n\n", tokens,
                  static_cast<unsigned long long>(forwards), sum / static_cast<double>(forwards));
    o << line << "| kernel | calls per forward | us per forward | us per call | share |\n"
      << "|---|---:|---:|---:|---:|\n";
    for (const auto& [label, t] : rows) {
      std::snprintf(line, sizeof line, "| %s | %.1f | %.1f | %.2f | %.1f%% |\n", label.c_str(),
                    static_cast<double>(t.calls) / static_cast<double>(forwards),
                    t.us / static_cast<double>(forwards), t.us / static_cast<double>(t.calls),
                    100 * t.us / sum);
      o << line;
    }
    for (const auto& [key, t] : host_) {
      if (key.first != tokens) continue;
      std::snprintf(line, sizeof line, "| host: %s | %.1f | %.1f | %.2f | |\n", key.second.c_str(),
                    static_cast<double>(t.calls) / static_cast<double>(forwards),
                    t.us / static_cast<double>(forwards), t.us / static_cast<double>(t.calls));
      o << line;
    }
  }
  return o.str();
}

}  // namespace rwkvd::engine::vk
