#pragma once
// Reads the fields of a JSON request body with the checks OpenAI's API makes: each field of the
// right type and range, or a 400 naming it; a field the endpoint does not know is an error too
// (finish()), so a misspelt parameter is not silently ignored. A null field counts as absent.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rwkvd::http {

// The body as a JSON object, or ApiError 400 (not JSON, not an object).
nlohmann::json parse_body(const std::string& body);

class Fields {
 public:
  explicit Fields(const nlohmann::json& body) : body_(body) {}

  const nlohmann::json* get(const std::string& name);  // null when absent or null
  std::optional<std::string> string(const std::string& name);
  std::optional<bool> boolean(const std::string& name);
  std::optional<double> number(const std::string& name, double lo, double hi);
  std::optional<int64_t> integer(const std::string& name, int64_t lo, int64_t hi);
  // A string or a list of strings (OpenAI's `stop`).
  std::vector<std::string> strings(const std::string& name);
  // Known and accepted, with no effect here (e.g. `user`).
  void ignore(const std::string& name) { (void)get(name); }
  // Accepted only when absent, null or equal to `allowed` (e.g. n = 1): else 400 saying so.
  void only(const std::string& name, const nlohmann::json& allowed);
  // 400 for the first field no getter asked for.
  void finish() const;

 private:
  const nlohmann::json& body_;
  std::set<std::string> read_;
};

}  // namespace rwkvd::http
