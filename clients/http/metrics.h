#pragma once
// The worker's `stats` (worker/stats.h) in Prometheus' text exposition format (version 0.0.4):
// counters as *_total, gauges, per-op latency summaries (quantiles of the last 1024 requests)
// and the batch-size histograms, all prefixed rwkvd_.
#include <cstdint>
#include <map>
#include <string>

#include "protocol/value.h"

namespace rwkvd::http {

std::string prometheus_text(const protocol::Value& stats);
// The front's own family: responses it sent, by HTTP status.
std::string prometheus_responses(const std::map<int, uint64_t>& by_status);

}  // namespace rwkvd::http
