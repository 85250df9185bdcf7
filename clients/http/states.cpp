// POST /v1/states: RWKV's recurrent state after a prompt (optionally from a given state), as
// base64 float32 of the layout of docs/STATE_LAYOUT.md. Sent back as `state` in a completion or
// chat request, it continues from there: a saved conversation costs its state, not its tokens.
#include "clients/http/base64.h"
#include "clients/http/generation.h"
#include "clients/http/respond.h"
#include "clients/http/routes.h"

namespace rwkvd::http {

using nlohmann::json;

void add_state_routes(httplib::Server& s, Context& ctx) {
  s.Post("/v1/states", guarded([&ctx](const httplib::Request& req, httplib::Response& res) {
           const json body = parse_body(req.body);
           Fields f(body);
           auto c = ctx.pool.take();
           const ModelCard m = model_card(*c);
           check_model(f, m);
           const std::vector<protocol::Input> prompts = read_prompts(f.get("prompt"), "prompt");
           if (prompts.size() != 1) throw bad_field("prompt", "one prompt");
           client::ForwardOptions o;
           o.output = protocol::Output::kLastEmbedding;  // the smallest output: the state is it
           o.return_state = true;
           if (const auto st = f.string("state")) o.state = floats_from_base64(*st, "state");
           f.finish();
           const client::ForwardResult r = c->forward(prompts[0], o);
           send_json(res, {{"object", "state"},
                           {"model", m.id},
                           {"shape", r.state->shape},
                           {"dtype", "float32"},
                           {"prompt_tokens", r.n_tokens},
                           {"state", base64_floats(r.state->data())}});
         }));
}

}  // namespace rwkvd::http
