#pragma once
// Errors of the HTTP front in OpenAI's shape: a status code and
// {"error": {"message", "type", "param", "code"}}. Every failure a handler meets becomes one of
// these (api_error_of), so a client of the OpenAI API can read it the way it reads OpenAI's.
#include <exception>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace rwkvd::http {

class ApiError : public std::runtime_error {
 public:
  // type: "invalid_request_error", "authentication_error", "not_found_error",
  // "rate_limit_error", "server_error"; param: the request field at fault ("" for none).
  ApiError(int status, std::string type, const std::string& message, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  nlohmann::json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// A bad field of the request body: 400 invalid_request_error naming the field.
ApiError bad_field(const std::string& param, const std::string& message);

// What an exception caught by a handler means to an HTTP client: worker errors by their code
// (a bad request 400, a full queue 429, a stopping worker 503...), a silent worker 503, an
// ApiError as it is, anything else 500.
ApiError api_error_of(const std::exception_ptr& e);

// The body of a response that has a status and no body of ours (404 of an unknown path, 413 of
// a body over the limit, 400 of a request httplib could not parse).
ApiError api_error_of_status(int status);

}  // namespace rwkvd::http
