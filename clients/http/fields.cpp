#include "clients/http/fields.h"

#include <cmath>

#include "clients/http/api_error.h"

namespace rwkvd::http {

using nlohmann::json;

json parse_body(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    throw ApiError(400, "invalid_request_error",
                   "the request body is not valid JSON (send Content-Type: application/json)", "",
                   "invalid_json");
  }
  if (!j.is_object())
    throw ApiError(400, "invalid_request_error", "the request body must be a JSON object", "",
                   "invalid_json");
  return j;
}

const json* Fields::get(const std::string& name) {
  read_.insert(name);
  const auto it = body_.find(name);
  if (it == body_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> Fields::string(const std::string& name) {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw bad_field(name, "'" + name + "' must be a string");
  return v->get<std::string>();
}

std::optional<bool> Fields::boolean(const std::string& name) {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) throw bad_field(name, "'" + name + "' must be true or false");
  return v->get<bool>();
}

std::optional<double> Fields::number(const std::string& name, double lo, double hi) {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw bad_field(name, "'" + name + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    throw bad_field(name, "'" + name + "' must be between " + json(lo).dump() + " and " +
                              json(hi).dump() + ", not " + v->dump());
  }
  return d;
}

std::optional<int64_t> Fields::integer(const std::string& name, int64_t lo, int64_t hi) {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) throw bad_field(name, "'" + name + "' must be an integer");
  // Non-negative numbers parse as unsigned, which may be above INT64_MAX: compare as such.
  const bool fits = v->is_number_unsigned()
                        ? v->get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                              (lo <= 0 || v->get<uint64_t>() >= static_cast<uint64_t>(lo))
                        : v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
  if (!fits) {
    throw bad_field(name, "'" + name + "' must be an integer from " + std::to_string(lo) + " to " +
                              std::to_string(hi) + ", not " + v->dump());
  }
  return v->get<int64_t>();
}

std::vector<std::string> Fields::strings(const std::string& name) {
  const json* v = get(name);
  if (v == nullptr) return {};
  if (v->is_string()) return {v->get<std::string>()};
  std::vector<std::string> out;
  if (v->is_array()) {
    for (const json& e : *v) {
      if (!e.is_string()) break;
      out.push_back(e.get<std::string>());
    }
    if (out.size() == v->size()) return out;
  }
  throw bad_field(name, "'" + name + "' must be a string or a list of strings");
}

void Fields::only(const std::string& name, const json& allowed) {
  const json* v = get(name);
  if (v != nullptr && *v != allowed) {
    throw bad_field(name, "'" + name + "' is supported only as " + allowed.dump() + " here");
  }
}

void Fields::finish() const {
  for (const auto& [k, v] : body_.items()) {
    if (!read_.contains(k)) {
      throw ApiError(400, "invalid_request_error", "unrecognized request argument: '" + k + "'", k,
                     "unknown_parameter");
    }
  }
}

}  // namespace rwkvd::http
