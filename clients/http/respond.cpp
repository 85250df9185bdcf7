#include "clients/http/respond.h"

namespace rwkvd::http {

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_json(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.body(), e.status());
}

Handler guarded(Handler h) {
  return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (...) {
      send_error(res, api_error_of(std::current_exception()));
    }
  };
}

}  // namespace rwkvd::http
