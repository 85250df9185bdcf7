#include "clients/http/metrics.h"

#include <charconv>
#include <sstream>
#include <string_view>
#include <vector>

namespace rwkvd::http {

using protocol::Value;

namespace {

double number(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt:
      return static_cast<double>(v.as_int());
    case Value::Kind::kUint:
      return static_cast<double>(v.as_uint());
    case Value::Kind::kFloat:
      return v.as_double();
    case Value::Kind::kBool:
      return v.as_bool() ? 1 : 0;
    default:
      return 0;
  }
}

bool is_map(const Value* v) {
  return v != nullptr && v->kind() == Value::Kind::kMap;
}

// The value at a '/'-separated path of maps, or null.
const Value* at(const Value& root, const std::string& path) {
  const Value* v = &root;
  std::stringstream ss(path);
  std::string key;
  while (v != nullptr && std::getline(ss, key, '/')) v = v->find(key);
  return v;
}

std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Writer {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    char buf[64];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;  // shortest exact form
    out_ << name << (labels.empty() ? "" : "{" + labels + "}") << ' '
         << std::string_view(buf, static_cast<size_t>(end - buf)) << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// One family of the stats: the value at `path`, or with a `label`, the map at `path` with a
// sample per key.
struct Family {
  const char* path;
  const char* name;
  const char* type;
  const char* help;
  const char* label = nullptr;
};

constexpr Family kFamilies[] = {
    {"uptime_s", "rwkvd_uptime_seconds", "gauge", "Seconds since the worker started."},
    {"queue_depth", "rwkvd_queue_depth", "gauge", "Requests queued for the engine."},
    {"active_sequences", "rwkvd_active_sequences", "gauge", "Sequences generating now."},
    {"sessions", "rwkvd_sessions", "gauge", "Open sessions."},
    {"slots_used", "rwkvd_slots_used", "gauge", "Backend state slots in use."},
    {"embed/dispatches", "rwkvd_embed_dispatches_total", "counter", "Batched embed engine runs."},
    {"embed/sequences", "rwkvd_embed_sequences_total", "counter", "Sequences embedded."},
    {"embed/tokens", "rwkvd_embed_tokens_total", "counter", "Tokens embedded."},
    {"generate/steps", "rwkvd_generate_steps_total", "counter", "Generation steps run."},
    {"generate/prompt_and_decode_tokens", "rwkvd_generate_input_tokens_total", "counter",
     "Prompt and decode tokens fed to generation steps."},
    {"generate/generated_tokens", "rwkvd_generated_tokens_total", "counter", "Tokens generated."},
    {"prefix_cache/hits", "rwkvd_prefix_cache_hits_total", "counter", "Prefix cache hits."},
    {"prefix_cache/misses", "rwkvd_prefix_cache_misses_total", "counter", "Prefix cache misses."},
    {"prefix_cache/entries", "rwkvd_prefix_cache_entries", "gauge", "Prefix cache entries."},
    {"prefix_cache/bytes", "rwkvd_prefix_cache_bytes", "gauge", "Prefix cache bytes in use."},
    {"prefix_cache/budget_bytes", "rwkvd_prefix_cache_budget_bytes", "gauge",
     "Prefix cache budget."},
    {"shm/bytes", "rwkvd_shm_bytes", "gauge", "Shared-memory ring data bytes."},
    {"shm/bytes_in_use", "rwkvd_shm_bytes_in_use", "gauge", "Ring bytes held by leases."},
    {"shm/leases", "rwkvd_shm_leases", "gauge", "Ring leases held."},
    {"shm/parked", "rwkvd_shm_parked", "gauge", "Replies waiting for ring space."},
    {"requests", "rwkvd_requests_total", "counter", "Requests received, by op.", "op"},
    {"errors", "rwkvd_errors_total", "counter", "Error replies, by error code.", "code"},
    {"shm/events", "rwkvd_shm_events_total", "counter", "Shared-memory ring events.", "event"},
    {"clients", "rwkvd_client_events_total", "counter", "Clients dropped (gone, stalled).",
     "event"},
};

void families(const Value& stats, Writer& w) {
  for (const Family& f : kFamilies) {
    const Value* v = at(stats, f.path);
    if (v == nullptr || (f.label != nullptr && !is_map(v))) continue;
    w.family(f.name, f.type, f.help);
    if (f.label == nullptr) {
      w.sample(f.name, "", number(*v));
      continue;
    }
    for (const auto& [k, x] : v->as_map())
      w.sample(f.name, std::string(f.label) + "=\"" + label_value(k) + "\"", number(x));
  }
}

void latencies(const Value& stats, Writer& w) {
  const Value* m = at(stats, "latency_ms");
  if (!is_map(m)) return;
  const std::string name = "rwkvd_request_latency_ms";
  w.family(name, "summary", "Latency in ms by op (quantiles of the last 1024).");
  for (const auto& [op, v] : m->as_map()) {
    const std::string l = "op=\"" + label_value(op) + "\"";
    for (const auto& [q, key] : {std::pair{"0.5", "p50"}, std::pair{"0.99", "p99"}}) {
      if (const Value* x = v.find(key)) w.sample(name, l + ",quantile=\"" + q + "\"", number(*x));
    }
    const double count = v.find("count") ? number(*v.find("count")) : 0;
    const double mean = v.find("mean") ? number(*v.find("mean")) : 0;
    w.sample(name + "_sum", l, mean * count);
    w.sample(name + "_count", l, count);
  }
}

// Power-of-two buckets (stats.h Histogram: bucket 2^i holds (2^(i-1), 2^i]) as a cumulative
// Prometheus histogram.
void histogram(const Value& stats, const char* path, const std::string& name, const char* help,
               Writer& w) {
  const Value* h = at(stats, path);
  if (!is_map(h) || !is_map(h->find("le"))) return;
  w.family(name, "histogram", help);
  double cumulative = 0;
  for (const auto& [le, n] : h->find("le")->as_map()) {
    cumulative += number(n);
    w.sample(name + "_bucket", "le=\"" + le + "\"", cumulative);
  }
  const double count = h->find("count") ? number(*h->find("count")) : 0;
  const double mean = h->find("mean") ? number(*h->find("mean")) : 0;
  w.sample(name + "_bucket", "le=\"+Inf\"", count);
  w.sample(name + "_sum", "", mean * count);
  w.sample(name + "_count", "", count);
}

}  // namespace

std::string prometheus_text(const Value& stats) {
  Writer w;
  families(stats, w);
  latencies(stats, w);
  histogram(stats, "generate/batch_sequences", "rwkvd_generate_batch_sequences",
            "Sequences per generation step.", w);
  histogram(stats, "embed/batch_sequences", "rwkvd_embed_batch_sequences",
            "Sequences per embed engine run.", w);
  return w.str();
}

std::string prometheus_responses(const std::map<int, uint64_t>& by_status) {
  Writer w;
  const std::string name = "rwkvd_http_responses_total";
  w.family(name, "counter", "Responses of the HTTP front, by status code.");
  for (const auto& [status, n] : by_status)
    w.sample(name, "code=\"" + std::to_string(status) + "\"", static_cast<double>(n));
  return w.str();
}

}  // namespace rwkvd::http
