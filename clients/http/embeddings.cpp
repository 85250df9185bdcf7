// POST /v1/embeddings: the worker's embed (final-norm hidden state of each input's last token),
// batched under its max_batch, as float lists or base64 float32 (encoding_format).
#include "clients/http/base64.h"
#include "clients/http/generation.h"
#include "clients/http/respond.h"
#include "clients/http/routes.h"

namespace rwkvd::http {

using nlohmann::json;
using protocol::Value;

namespace {

struct Embedded {
  std::vector<float> data;  // [n_inputs, n_embd]
  uint64_t tokens = 0;
};

// One embed request per max_batch inputs, on one connection.
Embedded embed_all(Context& ctx, const std::vector<protocol::Input>& inputs, size_t max_batch) {
  auto c = ctx.pool.take();
  Embedded out;
  for (size_t at = 0; at < inputs.size(); at += max_batch) {
    protocol::Request req;
    req.op = protocol::Op::kEmbed;
    const size_t end = std::min(inputs.size(), at + max_batch);
    req.inputs.assign(inputs.begin() + static_cast<std::ptrdiff_t>(at),
                      inputs.begin() + static_cast<std::ptrdiff_t>(end));
    const protocol::Reply r = c->call(req);
    const protocol::Value* tensor = r.body.find("embeddings");
    if (tensor == nullptr) throw std::runtime_error("the worker's embed reply has no embeddings");
    const client::Tensor t = c->to_tensor(*tensor);
    out.data.insert(out.data.end(), t.data().begin(), t.data().end());
    if (const Value* n = r.body.find("n_tokens")) {
      for (const Value& k : n->as_array()) out.tokens += k.as_uint();
    }
  }
  return out;
}

json embedding_list(const Embedded& e, size_t n_embd, bool base64, const std::string& model) {
  json data = json::array();
  for (size_t i = 0; i * n_embd < e.data.size(); ++i) {
    const std::span<const float> row(e.data.data() + i * n_embd, n_embd);
    json values =
        base64 ? json(base64_floats(row)) : json(std::vector<float>(row.begin(), row.end()));
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(values)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", e.tokens}, {"total_tokens", e.tokens}}}};
}

}  // namespace

void add_embedding_routes(httplib::Server& s, Context& ctx) {
  post_model(
      s, ctx, "/v1/embeddings", [&ctx](Fields& f, const ModelCard& m, httplib::Response& res) {
        const std::vector<protocol::Input> inputs = read_prompts(f.get("input"), "input");
        const std::string format = f.string("encoding_format").value_or("float");
        if (format != "float" && format != "base64")
          throw bad_field("encoding_format", "'encoding_format' must be 'float' or 'base64'");
        f.only("dimensions", m.n_embd);
        f.ignore("user");
        f.finish();
        const Embedded e = embed_all(ctx, inputs, std::max<uint64_t>(1, m.max_batch));
        send_json(res, embedding_list(e, m.n_embd, format == "base64", m.id));
      });
}

}  // namespace rwkvd::http
