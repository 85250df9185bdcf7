// POST /v1/chat/completions: the messages as an RWKV world-format prompt (chat_prompt.h), the
// reply generated until the next user turn, whole or streamed, in OpenAI's shapes.
#include "clients/http/chat_prompt.h"
#include "clients/http/generation.h"
#include "clients/http/respond.h"
#include "clients/http/routes.h"

namespace rwkvd::http {

using nlohmann::json;

namespace {

json chat_chunk(const std::string& id, int64_t created, const std::string& model, json delta,
                const json& reason) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"system_fingerprint", nullptr},
          {"choices",
           {{{"index", 0},
             {"delta", std::move(delta)},
             {"logprobs", nullptr},
             {"finish_reason", reason}}}}};
}

// The model answers "Assistant: <reply>": the space after the colon is not part of the reply.
std::string trim_front(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b);
}

void respond_whole(Context& ctx, const Generation& g, const ModelCard& m, httplib::Response& res) {
  const client::GenerateResult r = generate_all(ctx, g).at(0);
  json message = {{"role", "assistant"}, {"content", trim_front(r.text)}, {"refusal", nullptr}};
  json body = {{"id", ctx.response_id("chatcmpl")},
               {"object", "chat.completion"},
               {"created", std::time(nullptr)},
               {"model", m.id},
               {"system_fingerprint", nullptr},
               {"choices",
                {{{"index", 0},
                  {"message", std::move(message)},
                  {"logprobs", nullptr},
                  {"finish_reason", finish_reason(r.finish_reason)}}}},
               {"usage", usage(r.prompt_tokens, r.completion_tokens)}};
  if (g.return_state) body["state"] = state_base64(r.state);
  send_json(res, body);
}

void respond_stream(Context& ctx, std::shared_ptr<const Generation> g, const ModelCard& m,
                    httplib::Response& res) {
  const std::string id = ctx.response_id("chatcmpl");
  const int64_t created = std::time(nullptr);
  // Whitespace before the reply's first character is dropped, across chunks.
  auto started = std::make_shared<bool>(false);
  auto on_text = [=](const std::string& t) -> std::optional<json> {
    const std::string piece = *started ? t : trim_front(t);
    if (piece.empty()) return std::nullopt;
    *started = true;
    return chat_chunk(id, created, m.id, {{"content", piece}}, nullptr);
  };
  auto on_end = [=](const client::GenerateResult& r) {
    std::vector<json> out{
        chat_chunk(id, created, m.id, json::object(), finish_reason(r.finish_reason))};
    if (g->include_usage) {
      out.push_back(chat_chunk(id, created, m.id, json::object(), nullptr));
      out.back()["choices"] = json::array();
      out.back()["usage"] = usage(r.prompt_tokens, r.completion_tokens);
    }
    return out;
  };
  json first = chat_chunk(id, created, m.id, {{"role", "assistant"}, {"content", ""}}, nullptr);
  stream_generation(ctx, g, res, {first}, on_text, on_end);
}

}  // namespace

void add_chat_routes(httplib::Server& s, Context& ctx) {
  post_model(s, ctx, "/v1/chat/completions",
             [&ctx](Fields& f, const ModelCard& m, httplib::Response& res) {
               auto g = std::make_shared<Generation>();
               const json* messages = f.get("messages");
               g->prompts = {protocol::Input{chat_prompt(messages ? *messages : json()), {}}};
               g->options.sampling.stop.push_back(kChatStop);
               // Chat has no default length in OpenAI's API: up to the worker's limit.
               read_sampling(f, m, m.max_new_tokens, *g);
               f.only("logprobs", false);
               f.ignore("top_logprobs");
               f.only("response_format", json{{"type", "text"}});
               f.only("parallel_tool_calls", json());
               f.ignore("store");
               f.ignore("metadata");
               f.finish();
               if (g->options.sampling.stop.size() > m.max_stop)
                 throw bad_field("stop",
                                 "at most " + std::to_string(m.max_stop - 1) + " stop strings");
               if (g->stream) {
                 respond_stream(ctx, g, m, res);
               } else {
                 respond_whole(ctx, *g, m, res);
               }
             });
}

}  // namespace rwkvd::http
