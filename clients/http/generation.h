#pragma once
// What /v1/completions and /v1/chat/completions share: their sampling fields mapped onto the
// worker's generate, and running it, whole or streamed as server-sent events.
#include <httplib.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "clients/cpp/client.h"
#include "clients/http/context.h"

namespace rwkvd::http {

struct Generation {
  std::vector<protocol::Input> prompts;  // one, or several (a completions list, not streamed)
  client::GenerateOptions options;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last event with the usage
  bool return_state = false;   // RWKV: the state after the generation, base64 float32
};

// max_tokens (chat also max_completion_tokens), temperature, top_p, top_k, presence_penalty,
// frequency_penalty, stop, seed, n (1), stream, stream_options, user, logit_bias ({}) and the
// RWKV fields state (base64 float32: start from it) and return_state; checked against the
// worker's limits so that a bad value fails before a stream starts.
void read_sampling(Fields& f, const ModelCard& card, uint64_t default_max_tokens, Generation& g);

// The prompt of a completion: a string, a list of strings, a list of token ids or a list of such
// lists.
std::vector<protocol::Input> read_prompts(const nlohmann::json* prompt, const std::string& param);

// A state the worker returned (return_state), as base64 float32; throws if it sent none.
std::string state_base64(const std::optional<client::Tensor>& state);

// OpenAI's finish_reason for the worker's ("length", "stop"; a cancelled one stopped).
std::string finish_reason(const std::string& worker_reason);
nlohmann::json usage(uint64_t prompt_tokens, uint64_t completion_tokens);

// The non-streamed results, one per prompt.
std::vector<client::GenerateResult> generate_all(Context& ctx, const Generation& g);

// Streams the generation of g.prompts[0] as server-sent events: `first`, then on_text(text) for
// each piece of text (null: no event), then on_end(result)'s events, then `data: [DONE]`. Errors
// after the stream started go out as an `{"error": ...}` event.
using TextEvent = std::function<std::optional<nlohmann::json>(const std::string&)>;
using EndEvents = std::function<std::vector<nlohmann::json>(const client::GenerateResult&)>;
void stream_generation(Context& ctx, std::shared_ptr<const Generation> g, httplib::Response& res,
                       std::vector<nlohmann::json> first, TextEvent on_text, EndEvents on_end);

}  // namespace rwkvd::http
