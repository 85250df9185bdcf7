#include "tools/bench_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace rwkvd::tools {

void BenchReport::add(const std::string& figure, const std::string& unit, double sample) {
  auto [it, inserted] = figures_.try_emplace(figure);
  if (inserted) order_.push_back(figure);
  it->second.unit = unit;
  it->second.samples.push_back(sample);
}

namespace {
struct Summary {
  double min, median, max;
};
Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {v.front(), med, v.back()};
}
}  // namespace

nlohmann::json BenchReport::to_json() const {
  nlohmann::json out = context_;
  nlohmann::json figs = nlohmann::json::object();
  for (const auto& name : order_) {
    const Figure& f = figures_.at(name);
    const Summary s = summarize(f.samples);
    figs[name] = {{"unit", f.unit},
                  {"min", s.min},
                  {"median", s.median},
                  {"max", s.max},
                  {"samples", f.samples}};
  }
  out["figures"] = figs;
  if (!notes_.empty()) out["notes"] = notes_;
  return out;
}

std::string BenchReport::to_markdown() const {
  std::ostringstream os;
  os << "| figure | median | min | max | unit |\n|---|---|---|---|---|\n";
  char buf[160];
  for (const auto& name : order_) {
    const Figure& f = figures_.at(name);
    const Summary s = summarize(f.samples);
    std::snprintf(buf, sizeof buf, "| %s | %.4g | %.4g | %.4g | %s |\n", name.c_str(), s.median,
                  s.min, s.max, f.unit.c_str());
    os << buf;
  }
  if (!notes_.empty()) os << "\n";
  for (const auto& n : notes_) os << "- " << n << "\n";
  return os.str();
}

nlohmann::json machine_description() {
  nlohmann::json m;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  m["host"] = host;
  utsname u{};
  if (uname(&u) == 0) m["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m["cores"] = std::thread::hardware_concurrency();
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) {
      m["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  m["memory_gib"] = static_cast<double>(pages) * static_cast<double>(page) / (1u << 30);
  return m;
}

}  // namespace rwkvd::tools
