// POST /v1/completions: text completion of a prompt (string, strings or token ids), whole or
// streamed, in OpenAI's shapes.
#include "clients/http/generation.h"
#include "clients/http/respond.h"
#include "clients/http/routes.h"

namespace rwkvd::http {

using nlohmann::json;

namespace {

// OpenAI's default for completions.
constexpr uint64_t kDefaultMaxTokens = 16;

json completion(const std::string& id, int64_t created, const std::string& model, json choices) {
  return {{"id", id},       {"object", "text_completion"},   {"created", created},
          {"model", model}, {"choices", std::move(choices)}, {"system_fingerprint", nullptr}};
}

json choice(size_t index, const std::string& text, const json& reason) {
  return {{"index", index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", reason}};
}

void respond_whole(Context& ctx, const Generation& g, const ModelCard& m, httplib::Response& res) {
  const auto results = generate_all(ctx, g);
  json choices = json::array();
  uint64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    choices.push_back(choice(i, results[i].text, finish_reason(results[i].finish_reason)));
    prompt_tokens += results[i].prompt_tokens;
    completion_tokens += results[i].completion_tokens;
  }
  json body = completion(ctx.response_id("cmpl"), std::time(nullptr), m.id, std::move(choices));
  body["usage"] = usage(prompt_tokens, completion_tokens);
  if (g.return_state) body["state"] = state_base64(results[0].state);
  send_json(res, body);
}

void respond_stream(Context& ctx, std::shared_ptr<const Generation> g, const ModelCard& m,
                    httplib::Response& res) {
  const std::string id = ctx.response_id("cmpl");
  const int64_t created = std::time(nullptr);
  auto on_text = [=](const std::string& t) -> std::optional<json> {
    if (t.empty()) return std::nullopt;
    return completion(id, created, m.id, {choice(0, t, nullptr)});
  };
  auto on_end = [=](const client::GenerateResult& r) {
    std::vector<json> out{
        completion(id, created, m.id, {choice(0, "", finish_reason(r.finish_reason))})};
    if (g->include_usage) {
      out.push_back(completion(id, created, m.id, json::array()));
      out.back()["usage"] = usage(r.prompt_tokens, r.completion_tokens);
    }
    return out;
  };
  stream_generation(ctx, g, res, {}, on_text, on_end);
}

}  // namespace

void add_completion_routes(httplib::Server& s, Context& ctx) {
  post_model(s, ctx, "/v1/completions",
             [&ctx](Fields& f, const ModelCard& m, httplib::Response& res) {
               auto g = std::make_shared<Generation>();
               g->prompts = read_prompts(f.get("prompt"), "prompt");
               read_sampling(f, m, kDefaultMaxTokens, *g);
               f.only("echo", false);
               f.only("logprobs", json());
               f.only("best_of", 1);
               f.only("suffix", json());
               f.finish();
               if (g->stream && g->prompts.size() != 1)
                 throw bad_field("prompt", "a streamed completion takes one prompt");
               if (g->return_state && g->prompts.size() != 1)
                 throw bad_field("return_state", "'return_state' takes one prompt");
               if (g->stream) {
                 respond_stream(ctx, g, m, res);
               } else {
                 respond_whole(ctx, *g, m, res);
               }
             });
}

}  // namespace rwkvd::http
