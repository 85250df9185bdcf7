// GET /health (is the worker answering, and with which model) and GET /metrics (the worker's
// stats in Prometheus' text format).
#include "clients/http/metrics.h"
#include "clients/http/respond.h"
#include "clients/http/routes.h"

namespace rwkvd::http {

void add_ops_routes(httplib::Server& s, Context& ctx) {
  s.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    try {
      const ModelCard m = model_card(*ctx.probe.take());
      send_json(res, {{"status", "ok"}, {"model", m.id}, {"worker", ctx.pool.endpoint()}});
    } catch (...) {
      nlohmann::json body = api_error_of(std::current_exception()).body();
      body["status"] = "unavailable";
      send_json(res, body, 503);
    }
  });
  s.Get("/metrics", guarded([&ctx](const httplib::Request&, httplib::Response& res) {
          const protocol::Value stats = ctx.probe.take()->stats();
          res.set_content(prometheus_text(stats) + prometheus_responses(ctx.responses()),
                          "text/plain; version=0.0.4; charset=utf-8");
        }));
}

}  // namespace rwkvd::http
