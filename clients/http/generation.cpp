#include "clients/http/generation.h"

#include "clients/http/api_error.h"
#include "clients/http/base64.h"
#include "clients/http/respond.h"

namespace rwkvd::http {

using nlohmann::json;

namespace {

// The HTTP client went away mid-stream.
struct ClientGone {};

void write_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  if (!sink.write(event.data(), event.size())) throw ClientGone{};
}

void read_stop(Fields& f, const ModelCard& card, Generation& g) {
  std::vector<std::string> stop = f.strings("stop");
  if (stop.size() > card.max_stop)
    throw bad_field("stop", "at most " + std::to_string(card.max_stop) + " stop strings");
  for (const std::string& s : stop) {
    if (s.empty() || s.size() > card.max_stop_bytes) {
      throw bad_field(
          "stop", "stop strings must have 1 to " + std::to_string(card.max_stop_bytes) + " bytes");
    }
  }
  auto& mine = g.options.sampling.stop;
  mine.insert(mine.end(), stop.begin(), stop.end());
}

void read_stream(Fields& f, Generation& g) {
  g.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) throw bad_field("stream_options", "'stream_options' must be an object");
    if (!g.stream) throw bad_field("stream_options", "'stream_options' needs 'stream': true");
    Fields inner(*so);
    g.include_usage = inner.boolean("include_usage").value_or(false);
    inner.finish();
  }
}

void read_state(Fields& f, Generation& g) {
  if (const auto s = f.string("state")) g.options.state = floats_from_base64(*s, "state");
  g.return_state = f.boolean("return_state").value_or(false);
  g.options.return_state = g.return_state;
  if (g.return_state && g.stream)
    throw bad_field("return_state", "'return_state' is for requests that are not streamed");
}

}  // namespace

void read_sampling(Fields& f, const ModelCard& card, uint64_t default_max_tokens, Generation& g) {
  auto& s = g.options.sampling;
  const auto max_new = static_cast<int64_t>(card.max_new_tokens);
  auto max_tokens = f.integer("max_tokens", 1, max_new);
  if (auto mct = f.integer("max_completion_tokens", 1, max_new)) max_tokens = mct;
  s.max_tokens = static_cast<uint32_t>(max_tokens.value_or(
      static_cast<int64_t>(std::min<uint64_t>(default_max_tokens, card.max_new_tokens))));
  s.temperature = static_cast<float>(f.number("temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  if (s.top_p <= 0) throw bad_field("top_p", "'top_p' must be above 0");
  s.top_k = static_cast<uint32_t>(f.integer("top_k", 0, card.n_vocab).value_or(0));
  s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2).value_or(0));
  s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2).value_or(0));
  if (auto seed = f.integer("seed", 0, INT64_MAX)) s.seed = static_cast<uint64_t>(*seed);
  read_stop(f, card, g);
  read_stream(f, g);
  read_state(f, g);
  f.only("n", 1);
  f.only("logit_bias", json::object());
  f.ignore("user");
}

std::vector<protocol::Input> read_prompts(const json* prompt, const std::string& param) {
  if (prompt == nullptr) throw bad_field(param, "'" + param + "' is required");
  auto tokens = [&](const json& list) {
    protocol::Input in;
    for (const json& t : list) {
      if (!t.is_number_unsigned() || t.get<uint64_t>() > INT32_MAX)
        throw bad_field(param, "token ids must be integers from 0");
      in.tokens.push_back(t.get<int32_t>());
    }
    if (in.tokens.empty()) throw bad_field(param, "an empty list of token ids");
    return in;
  };
  if (prompt->is_string()) return {protocol::Input{prompt->get<std::string>(), {}}};
  if (!prompt->is_array() || prompt->empty())
    throw bad_field(param, "'" + param + "' must be a string, token ids, or a non-empty list");
  if ((*prompt)[0].is_number()) return {tokens(*prompt)};
  std::vector<protocol::Input> out;
  for (const json& p : *prompt) {
    if (p.is_string()) {
      out.push_back(protocol::Input{p.get<std::string>(), {}});
    } else if (p.is_array()) {
      out.push_back(tokens(p));
    } else {
      throw bad_field(param, "'" + param + "' entries must be strings or lists of token ids");
    }
  }
  return out;
}

std::string state_base64(const std::optional<client::Tensor>& state) {
  if (!state) throw std::runtime_error("the worker's reply has no state");
  return base64_floats(state->data());
}

std::string finish_reason(const std::string& worker_reason) {
  return worker_reason == "length" ? "length" : "stop";
}

json usage(uint64_t prompt_tokens, uint64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

std::vector<client::GenerateResult> generate_all(Context& ctx, const Generation& g) {
  auto c = ctx.pool.take();
  if (g.prompts.size() == 1) return {c->generate(g.prompts[0], g.options)};
  return c->generate_all(g.prompts, {}, g.options);
}

void stream_generation(Context& ctx, std::shared_ptr<const Generation> g, httplib::Response& res,
                       std::vector<json> first, TextEvent on_text, EndEvents on_end) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // Runs on this request's thread once the headers are out; nothing may escape it.
  auto provider = [&ctx, g, first, on_text, on_end](size_t, httplib::DataSink& sink) {
    std::optional<ClientPool::Loan> c;
    auto text = [&](const std::string& t) {
      if (auto ev = on_text(t)) write_event(sink, dump(*ev));
    };
    try {
      c.emplace(ctx.pool);
      for (const json& ev : first) write_event(sink, dump(ev));
      const client::GenerateResult r = (*c)->generate(
          g->prompts[0], g->options, [&](const client::Chunk& ch) { text(ch.text); });
      text(r.text);
      for (const json& ev : on_end(r)) write_event(sink, dump(ev));
      write_event(sink, "[DONE]");
    } catch (const ClientGone&) {
      if (c) c->drop();  // the worker drops this client's generation at its next chunk
      return false;
    } catch (...) {
      try {
        write_event(sink, dump(api_error_of(std::current_exception()).body()));
      } catch (...) {  // the client went away too
        if (c) c->drop();
        return false;
      }
    }
    sink.done();
    return true;
  };
  res.set_chunked_content_provider("text/event-stream", provider);
}

}  // namespace rwkvd::http
