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
  post_model(s, ctx, "/v1/states", [&ctx](Fields& f, const ModelCard& m, httplib::Response& res) {
    const std::vector<protocol::Input> prompts = read_prompts(f.get("prompt"), "prompt");
    if (prompts.size() != 1) throw bad_field("prompt", "one prompt");
    client::ForwardOptions o;
    o.output = protocol::Output::kLastEmbedding;  // the smallest output: the state is it
    o.return_state = true;
    if (const auto st = f.string("state")) o.state = floats_from_base64(*st, "state");
    f.finish();
    const client::ForwardResult out = ctx.pool.take()->forward(prompts[0], o);
    send_json(res, {{"object", "state"},
                    {"model", m.id},
                    {"shape", out.state ? out.state->shape : std::vector<int64_t>{}},
                    {"dtype", "float32"},
                    {"prompt_tokens", out.n_tokens},
                    {"state", state_base64(out.state)}});
  });
}

}  // namespace rwkvd::http
