#include "clients/http/front.h"

#include <httplib.h>
#include <openssl/crypto.h>

#include <stdexcept>

#include "clients/http/context.h"
#include "clients/http/respond.h"
#include "clients/http/routes.h"
#include "protocol/endpoint.h"

namespace rwkvd::http {

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

namespace {

// `Authorization: Bearer <key>`, compared in constant time.
bool authorized(const httplib::Request& req, const std::string& key) {
  const std::string got = req.get_header_value("Authorization");
  const std::string want = "Bearer " + key;
  return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), got.size()) == 0;
}

}  // namespace

Front::Front(HttpOptions options) {
  if (!options.allow_remote && !is_loopback_host(options.host)) {
    throw std::invalid_argument("refusing to listen on " + options.host +
                                ", not a loopback address: pass --allow-remote (and set an "
                                "--api-key) to serve other hosts");
  }
  if (options.endpoint.empty()) options.endpoint = protocol::default_endpoint();
  ctx_ = std::make_unique<Context>(std::move(options));
  server_ = std::make_unique<httplib::Server>();
  const unsigned threads = std::max(1u, ctx_->opt.threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(ctx_->opt.max_body_bytes);
  add_routes();
}

Front::~Front() = default;

const HttpOptions& Front::options() const {
  return ctx_->opt;
}

void Front::add_routes() {
  httplib::Server& s = *server_;
  const std::string key = ctx_->opt.api_key;
  // Every path but /health needs the token when there is one (a load balancer's probe has none).
  s.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || req.path == "/health" || authorized(req, key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "invalid_request_error",
                             "missing or incorrect API key: send 'Authorization: Bearer <key>'", "",
                             "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Responses of 400 and above that have no body of ours (unknown path, body too large, a
  // request httplib could not parse) get one in OpenAI's shape.
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      const int status = res.status;
      send_error(res, api_error_of_status(status));
      res.status = status;
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                             std::exception_ptr e) { send_error(res, api_error_of(e)); });
  s.set_logger([ctx = ctx_.get()](const httplib::Request&, const httplib::Response& res) {
    ctx->count_response(res.status);
  });
  add_model_routes(s, *ctx_);
  add_completion_routes(s, *ctx_);
  add_chat_routes(s, *ctx_);
  add_embedding_routes(s, *ctx_);
  add_state_routes(s, *ctx_);
  add_ops_routes(s, *ctx_);
}

int Front::bind() {
  HttpOptions& o = ctx_->opt;
  if (o.port == 0) {
    o.port = server_->bind_to_any_port(o.host);
    if (o.port < 0) throw std::runtime_error("cannot listen on " + o.host);
  } else if (!server_->bind_to_port(o.host, o.port)) {
    throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (in use?)");
  }
  bound_ = true;
  return o.port;
}

void Front::run() {
  if (!bound_) bind();
  server_->listen_after_bind();
}

std::string Front::probe_worker() {
  try {
    (void)model_card(*ctx_->probe.take());
    return "";
  } catch (...) {
    return api_error_of(std::current_exception()).what();
  }
}

void Front::stop() {
  server_->stop();
}

}  // namespace rwkvd::http
