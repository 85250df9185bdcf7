#pragma once
// Figures of a benchmark run: each a list of samples (one per repeat), reported as
// min/median/max, with the machine, device, model and commit, as JSON and as a markdown table.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rwkvd::tools {

class BenchReport {
 public:
  void set_context(const std::string& key, nlohmann::json value) {
    context_[key] = std::move(value);
  }
  // A context value, or null.
  nlohmann::json context(const std::string& key) const {
    return context_.value(key, nlohmann::json());
  }
  void add(const std::string& figure, const std::string& unit, double sample);
  bool has(const std::string& figure) const { return figures_.contains(figure); }
  // A line printed under the markdown table (and kept in the JSON as "notes").
  void add_note(const std::string& line) { notes_.push_back(line); }

  nlohmann::json to_json() const;
  std::string to_markdown() const;

 private:
  struct Figure {
    std::string unit;
    std::vector<double> samples;
  };
  nlohmann::json context_ = nlohmann::json::object();
  std::map<std::string, Figure> figures_;
  std::vector<std::string> order_;
  std::vector<std::string> notes_;
};

// Machine facts for the report: host, CPU model, cores, memory, kernel.
nlohmann::json machine_description();

}  // namespace rwkvd::tools
