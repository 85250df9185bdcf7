#pragma once
// The front's endpoints, a file each; every handler runs inside guarded() (respond.h).
#include <httplib.h>

#include <functional>
#include <string>

#include "clients/http/context.h"

namespace rwkvd::http {

// A POST endpoint with a JSON body naming the worker's model: `fn` gets the body's fields, its
// `model` already checked (check_model), and the worker's model card; it runs inside guarded().
using ModelHandler = std::function<void(Fields&, const ModelCard&, httplib::Response&)>;
void post_model(httplib::Server& s, Context& ctx, const std::string& path, ModelHandler fn);

void add_model_routes(httplib::Server& s, Context& ctx);       // GET /v1/models[/{id}]
void add_completion_routes(httplib::Server& s, Context& ctx);  // POST /v1/completions
void add_chat_routes(httplib::Server& s, Context& ctx);        // POST /v1/chat/completions
void add_embedding_routes(httplib::Server& s, Context& ctx);   // POST /v1/embeddings
void add_state_routes(httplib::Server& s, Context& ctx);       // POST /v1/states
void add_ops_routes(httplib::Server& s, Context& ctx);         // GET /health, /metrics

}  // namespace rwkvd::http
