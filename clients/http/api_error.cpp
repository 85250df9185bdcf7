#include "clients/http/api_error.h"

#include "clients/cpp/client.h"

namespace rwkvd::http {

using protocol::ErrorCode;

nlohmann::json ApiError::body() const {
  auto opt = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  return {{"error",
           {{"message", what()}, {"type", type_}, {"param", opt(param_)}, {"code", opt(code_)}}}};
}

ApiError bad_field(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", message, param, "invalid_value");
}

namespace {

ApiError of_worker(const client::WorkerError& e) {
  const std::string code = protocol::error_name(e.code());
  switch (e.code()) {
    case ErrorCode::kBusy:
    case ErrorCode::kQuotaExceeded:
      return ApiError(429, "rate_limit_error", e.what(), "", code);
    case ErrorCode::kShuttingDown:
      return ApiError(503, "server_error", e.what(), "", code);
    case ErrorCode::kUnknownSession:
      return ApiError(404, "not_found_error", e.what(), "", code);
    case ErrorCode::kInternal:
    case ErrorCode::kCancelled:
      return ApiError(500, "server_error", e.what(), "", code);
    default:  // the request's content: a limit, a bad token, a bad state...
      return ApiError(400, "invalid_request_error", e.what(), "", code);
  }
}

}  // namespace

ApiError api_error_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const ApiError& a) {
    return a;
  } catch (const client::WorkerError& w) {
    return of_worker(w);
  } catch (const client::TimeoutError& t) {
    return ApiError(503, "server_error",
                    std::string("the rwkvd worker is not answering: ") + t.what() +
                        " (is `rwkvd serve` running on that endpoint?)",
                    "", "worker_unavailable");
  } catch (const nlohmann::json::exception& j) {
    return ApiError(400, "invalid_request_error", std::string("bad JSON: ") + j.what(), "",
                    "invalid_json");
  } catch (const std::exception& x) {
    return ApiError(500, "server_error", x.what(), "", "internal_error");
  } catch (...) {
    return ApiError(500, "server_error", "unknown error", "", "internal_error");
  }
}

ApiError api_error_of_status(int status) {
  switch (status) {
    case 404:
      return ApiError(404, "invalid_request_error", "no such endpoint", "", "not_found");
    case 405:
      return ApiError(405, "invalid_request_error", "method not allowed for this endpoint", "",
                      "method_not_allowed");
    case 413:
      return ApiError(413, "invalid_request_error",
                      "request body too large (rwkvd http --max-body-bytes)", "",
                      "request_too_large");
    default:
      if (status >= 500) return ApiError(status, "server_error", "server error", "", "");
      return ApiError(status, "invalid_request_error", "bad request", "", "");
  }
}

}  // namespace rwkvd::http
