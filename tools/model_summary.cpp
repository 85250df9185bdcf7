#include "tools/model_summary.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace rwkvd::tools {

std::map<std::string, TypeShare> bytes_per_type(const engine::GgufFile& f) {
  std::map<std::string, TypeShare> out;
  for (const auto& t : f.tensors()) {
    TypeShare& s = out[std::string(engine::ggml_traits(t.type).name)];
    s.tensors += 1;
    s.bytes += t.n_bytes;
  }
  return out;
}

std::string weight_types(const engine::GgufFile& f) {
  const auto per_type = bytes_per_type(f);
  std::vector<std::pair<std::string, uint64_t>> v;
  uint64_t total = 0;
  for (const auto& [type, s] : per_type) {
    v.emplace_back(type, s.bytes);
    total += s.bytes;
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [type, bytes] : v) {
    const double pct = total ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0;
    out += (out.empty() ? "" : ", ") + type + " " + std::to_string(std::lround(pct)) + "%";
  }
  return out;
}

}  // namespace rwkvd::tools
