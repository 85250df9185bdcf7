#pragma once
// The front's endpoints, a file each; every handler runs inside guarded() (respond.h).
#include <httplib.h>

#include "clients/http/context.h"

namespace rwkvd::http {

void add_model_routes(httplib::Server& s, Context& ctx);       // GET /v1/models[/{id}]
void add_completion_routes(httplib::Server& s, Context& ctx);  // POST /v1/completions
void add_chat_routes(httplib::Server& s, Context& ctx);        // POST /v1/chat/completions
void add_embedding_routes(httplib::Server& s, Context& ctx);   // POST /v1/embeddings
void add_state_routes(httplib::Server& s, Context& ctx);       // POST /v1/states
void add_ops_routes(httplib::Server& s, Context& ctx);         // GET /health, /metrics

}  // namespace rwkvd::http
