#include "clients/http/routes.h"

#include "clients/http/respond.h"

namespace rwkvd::http {

void post_model(httplib::Server& s, Context& ctx, const std::string& path, ModelHandler fn) {
  s.Post(path,
         guarded([&ctx, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
           const nlohmann::json body = parse_body(req.body);
           Fields f(body);
           const ModelCard m = model_card(*ctx.pool.take());
           check_model(f, m);
           fn(f, m, res);
         }));
}

}  // namespace rwkvd::http
