// GET /v1/models and /v1/models/{id}: the worker's one model, as OpenAI lists models.
#include "clients/http/respond.h"
#include "clients/http/routes.h"

namespace rwkvd::http {

namespace {

nlohmann::json model_object(const Context& ctx, const ModelCard& m) {
  return {{"id", m.id}, {"object", "model"}, {"created", ctx.created}, {"owned_by", "rwkvd"}};
}

}  // namespace

void add_model_routes(httplib::Server& s, Context& ctx) {
  s.Get("/v1/models", guarded([&ctx](const httplib::Request&, httplib::Response& res) {
          const ModelCard m = model_card(*ctx.pool.take());
          send_json(res, {{"object", "list"}, {"data", {model_object(ctx, m)}}});
        }));
  s.Get(R"(/v1/models/([^/]+))",
        guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
          const ModelCard m = model_card(*ctx.pool.take());
          if (req.matches[1] != m.id) {
            throw ApiError(404, "invalid_request_error",
                           "the model '" + req.matches[1].str() + "' does not exist", "model",
                           "model_not_found");
          }
          send_json(res, model_object(ctx, m));
        }));
}

}  // namespace rwkvd::http
