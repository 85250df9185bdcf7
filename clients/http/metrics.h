#pragma once
// The worker's `stats` (worker/stats.h) in Prometheus' text exposition format (version 0.0.4):
// counters as *_total, gauges, per-op latency summaries (quantiles of the last 1024 requests)
// and the batch-size histograms, all prefixed rwkvd_.
#include <string>

#include "protocol/value.h"

namespace rwkvd::http {

std::string prometheus_text(const protocol::Value& stats);

}  // namespace rwkvd::http
