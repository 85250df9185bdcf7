#include "clients/http/context.h"

#include <cstdio>
#include <ctime>
#include <stdexcept>

#include "clients/http/api_error.h"

namespace rwkvd::http {

using protocol::Value;

namespace {

uint64_t limit_of(const Value& limits, const char* name) {
  const Value* v = limits.find(name);
  return v != nullptr ? v->as_uint() : 0;
}

const Value& need(const Value& v, const char* key) {
  const Value* f = v.find(key);
  if (f == nullptr)
    throw std::runtime_error(std::string("the worker's hello has no '") + key + "'");
  return *f;
}

}  // namespace

ModelCard model_card(client::Client& c) {
  const Value hello = c.hello();
  const Value& model = need(hello, "model");
  ModelCard m;
  m.id = need(model, "name").as_str();
  m.n_vocab = static_cast<uint32_t>(need(model, "n_vocab").as_uint());
  m.n_embd = static_cast<uint32_t>(need(model, "n_embd").as_uint());
  for (const Value& d : need(model, "state_shape").as_array())
    m.state_shape.push_back(static_cast<int64_t>(d.as_uint()));
  const Value& limits = need(hello, "limits");
  m.max_new_tokens = limit_of(limits, "max_new_tokens");
  m.max_batch = limit_of(limits, "max_batch");
  m.max_stop = limit_of(limits, "max_stop");
  m.max_stop_bytes = limit_of(limits, "max_stop_bytes");
  return m;
}

Context::Context(HttpOptions o)
    : opt(std::move(o)),
      pool(opt.endpoint, opt.timeout),
      probe(opt.endpoint, std::min(opt.timeout, std::chrono::milliseconds(2000))),
      created(static_cast<int64_t>(std::time(nullptr))) {}

std::string Context::response_id(const char* prefix) {
  // The start time in the id keeps ids of a restarted front apart from the last one's.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08llx%08llx", prefix,
                static_cast<unsigned long long>(created),
                static_cast<unsigned long long>(next_id.fetch_add(1)));
  return buf;
}

void Context::count_response(int status) {
  std::lock_guard lock(mu_);
  responses_[status] += 1;
}

std::map<int, uint64_t> Context::responses() const {
  std::lock_guard lock(mu_);
  return responses_;
}

void check_model(Fields& f, const ModelCard& card) {
  const auto model = f.string("model");
  if (!model) {
    throw ApiError(400, "invalid_request_error", "you must provide a model parameter", "model",
                   "missing_model");
  }
  if (*model != card.id) {
    throw ApiError(404, "invalid_request_error",
                   "the model '" + *model + "' does not exist; this server has '" + card.id + "'",
                   "model", "model_not_found");
  }
}

}  // namespace rwkvd::http
