#pragma once
// Writing responses: JSON bodies (invalid UTF-8 in generated text replaced, not thrown on),
// OpenAI-style errors, and the guard every handler runs in so that no exception leaves it.
#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "clients/http/api_error.h"

namespace rwkvd::http {

std::string dump(const nlohmann::json& j);
void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
void send_error(httplib::Response& res, const ApiError& e);

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
// The handler, its exceptions answered as api_error_of() says.
Handler guarded(Handler h);

}  // namespace rwkvd::http
