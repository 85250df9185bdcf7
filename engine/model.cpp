#include "engine/model.h"

#include <algorithm>
#include <string>

#include "engine/error.h"

namespace rwkvd::engine {
namespace {

constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxEmbd = 1u << 16;

class TensorChecker {
 public:
  explicit TensorChecker(const GgufFile& f) : f_(f) {}

  [[noreturn]] void fail(const std::string& msg) const {
    throw EngineError(f_.path() + ": " + msg);
  }

  // A tensor whose ne must be exactly `ne` (trailing 1s ignored).
  const GgufTensor* shaped(const std::string& name, std::initializer_list<int64_t> ne) const {
    const GgufTensor* t = f_.find_tensor(name);
    if (t == nullptr) fail("missing tensor '" + name + "'");
    std::array<int64_t, 4> want{1, 1, 1, 1};
    size_t i = 0;
    for (int64_t d : ne) want[i++] = d;
    if (t->ne != want) fail("tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " +
                            shape_str(want));
    return t;
  }

  // A per-channel vector: exactly `n` elements in any shape with ne[0] == n.
  const GgufTensor* vector(const std::string& name, int64_t n) const {
    const GgufTensor* t = f_.find_tensor(name);
    if (t == nullptr) fail("missing tensor '" + name + "'");
    if (t->ne[0] != n || t->n_elements() != n) {
      fail("tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " +
           std::to_string(n) + " elements");
    }
    return t;
  }

  static std::string shape_str(const std::array<int64_t, 4>& ne) {
    std::string s = "[";
    int last = 3;
    while (last > 0 && ne[last] == 1) --last;
    for (int i = 0; i <= last; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
  }

 private:
  const GgufFile& f_;
};

uint32_t positive(const GgufFile& f, const std::string& key, uint32_t max) {
  const uint32_t v = f.get_u32(key);
  if (v == 0 || v > max) {
    throw EngineError(f.path() + ": metadata key '" + key + "' = " + std::to_string(v) +
                      " is out of range 1.." + std::to_string(max));
  }
  return v;
}

// The vocabulary is optional (a model can run on token ids), but when present it must have one
// entry per row of token_embd, as llama.cpp requires, or ids and strings would disagree.
void check_tokenizer(const GgufFile& f, uint32_t n_vocab) {
  auto expect_array = [&](const char* key, std::initializer_list<GgufValueType> elem,
                          const char* elem_name) {
    const GgufValue* v = f.find(key);
    if (v == nullptr) return;
    const auto* a = std::get_if<GgufArray>(&v->value);
    if (a == nullptr || std::find(elem.begin(), elem.end(), a->elem_type) == elem.end()) {
      throw EngineError(f.path() + ": metadata key '" + key + "' must be an array of " + elem_name +
                        ", found " +
                        (a ? "an array of " + std::string(gguf_value_type_name(a->elem_type))
                           : std::string(gguf_value_type_name(v->type))));
    }
    if (a->count != n_vocab) {
      throw EngineError(f.path() + ": metadata key '" + key + "' has " + std::to_string(a->count) +
                        " entries, expected " + std::to_string(n_vocab) +
                        " (rows of token_embd.weight)");
    }
  };
  expect_array("tokenizer.ggml.tokens", {GgufValueType::STRING}, "strings");
  expect_array("tokenizer.ggml.token_type", {GgufValueType::I32, GgufValueType::U32},
               "32-bit integers");
}

}  // namespace

std::shared_ptr<const Rwkv7Model> Rwkv7Model::load(const std::string& path) {
  return from_gguf(GgufFile::open(path));
}

std::shared_ptr<const Rwkv7Model> Rwkv7Model::from_gguf(std::unique_ptr<GgufFile> file) {
  auto m = std::shared_ptr<Rwkv7Model>(new Rwkv7Model());
  m->file_ = std::move(file);
  const GgufFile& f = *m->file_;
  const std::string arch(f.get_string("general.architecture"));
  if (arch != "rwkv7") {
    throw EngineError(f.path() + ": metadata key 'general.architecture' = '" + arch +
                      "': architecture not supported, expected 'rwkv7'");
  }
  Rwkv7Hparams& hp = m->hp_;
  hp.n_layer = positive(f, "rwkv7.block_count", kMaxLayers);
  hp.n_embd = positive(f, "rwkv7.embedding_length", kMaxEmbd);
  hp.head_size = positive(f, "rwkv7.wkv.head_size", 1024);
  hp.n_ffn = positive(f, "rwkv7.feed_forward_length", 16 * kMaxEmbd);
  hp.rank_w = positive(f, "rwkv7.attention.decay_lora_rank", kMaxEmbd);
  hp.rank_a = positive(f, "rwkv7.attention.iclr_lora_rank", kMaxEmbd);
  hp.rank_v = positive(f, "rwkv7.attention.value_residual_mix_lora_rank", kMaxEmbd);
  hp.rank_g = positive(f, "rwkv7.attention.gate_lora_rank", kMaxEmbd);
  if (f.has("rwkv7.attention.layer_norm_epsilon")) {
    hp.ln_eps = f.get_f32("rwkv7.attention.layer_norm_epsilon");
    if (!(hp.ln_eps > 0.0f && hp.ln_eps < 1.0f)) {
      throw EngineError(f.path() + ": layer_norm_epsilon " + std::to_string(hp.ln_eps) +
                        " is not in (0, 1)");
    }
  }
  if (hp.n_embd % hp.head_size != 0) {
    throw EngineError(f.path() + ": embedding_length " + std::to_string(hp.n_embd) +
                      " is not a multiple of head_size " + std::to_string(hp.head_size));
  }
  hp.n_head = hp.n_embd / hp.head_size;
  // llama.cpp writes head_count = 0 (unused); a non-zero value must agree with D / N.
  if (f.has("rwkv7.attention.head_count")) {
    const uint32_t heads = f.get_u32("rwkv7.attention.head_count");
    if (heads != 0 && heads != hp.n_head) {
      throw EngineError(f.path() +
                        ": metadata key 'rwkv7.attention.head_count' = " + std::to_string(heads) +
                        " but embedding_length " + std::to_string(hp.n_embd) + " / head_size " +
                        std::to_string(hp.head_size) + " gives " + std::to_string(hp.n_head));
    }
  }

  TensorChecker c(f);
  const int64_t D = hp.n_embd, F = hp.n_ffn;
  const GgufTensor* emb = f.find_tensor("token_embd.weight");
  if (emb == nullptr) c.fail("missing tensor 'token_embd.weight'");
  if (emb->ne[0] != D || emb->ne[2] != 1 || emb->ne[3] != 1 || emb->ne[1] > (1 << 24)) {
    c.fail("tensor 'token_embd.weight' has shape " + TensorChecker::shape_str(emb->ne) +
           ", expected [" + std::to_string(D) + ", n_vocab]");
  }
  hp.n_vocab = static_cast<uint32_t>(emb->ne[1]);
  const int64_t V = hp.n_vocab;
  m->token_embd = emb;
  m->emb_norm_w = c.vector("token_embd_norm.weight", D);
  m->emb_norm_b = c.vector("token_embd_norm.bias", D);
  m->out_norm_w = c.vector("output_norm.weight", D);
  m->out_norm_b = c.vector("output_norm.bias", D);
  m->head = c.shaped("output.weight", {D, V});

  m->layers_.resize(hp.n_layer);
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Rwkv7Layer& L = m->layers_[l];
    L.attn_norm_w = c.vector(p + "attn_norm.weight", D);
    L.attn_norm_b = c.vector(p + "attn_norm.bias", D);
    L.attn_norm2_w = c.vector(p + "attn_norm_2.weight", D);
    L.attn_norm2_b = c.vector(p + "attn_norm_2.bias", D);
    L.lerp_fused = f.find_tensor(p + "time_mix_lerp_fused.weight");
    if (L.lerp_fused == nullptr) c.fail("missing tensor '" + p + "time_mix_lerp_fused.weight'");
    if (L.lerp_fused->ne[0] != D || L.lerp_fused->n_elements() != 6 * D) {
      c.fail("tensor '" + p + "time_mix_lerp_fused.weight' has shape " +
             TensorChecker::shape_str(L.lerp_fused->ne) + ", expected 6 slices of " +
             std::to_string(D));
    }
    L.w0 = c.vector(p + "time_mix_w0.weight", D);
    L.w1 = c.shaped(p + "time_mix_w1.weight", {D, hp.rank_w});
    L.w2 = c.shaped(p + "time_mix_w2.weight", {hp.rank_w, D});
    L.a0 = c.vector(p + "time_mix_a0.weight", D);
    L.a1 = c.shaped(p + "time_mix_a1.weight", {D, hp.rank_a});
    L.a2 = c.shaped(p + "time_mix_a2.weight", {hp.rank_a, D});
    L.v0 = c.vector(p + "time_mix_v0.weight", D);
    // Layer 0 has no value residual; converters store copies of a1/a2 there (rank Ra).
    const int64_t rv = l == 0 && f.find_tensor(p + "time_mix_v1.weight") != nullptr &&
                               f.find_tensor(p + "time_mix_v1.weight")->ne[1] == hp.rank_a
                           ? hp.rank_a
                           : hp.rank_v;
    L.v1 = c.shaped(p + "time_mix_v1.weight", {D, rv});
    L.v2 = c.shaped(p + "time_mix_v2.weight", {rv, D});
    L.g1 = c.shaped(p + "time_mix_g1.weight", {D, hp.rank_g});
    L.g2 = c.shaped(p + "time_mix_g2.weight", {hp.rank_g, D});
    L.k_k = c.vector(p + "time_mix_k_k.weight", D);
    L.k_a = c.vector(p + "time_mix_k_a.weight", D);
    L.r_k = c.vector(p + "time_mix_r_k.weight", D);
    L.receptance = c.shaped(p + "time_mix_receptance.weight", {D, D});
    L.key = c.shaped(p + "time_mix_key.weight", {D, D});
    L.value = c.shaped(p + "time_mix_value.weight", {D, D});
    L.output = c.shaped(p + "time_mix_output.weight", {D, D});
    L.ln_x_w = c.vector(p + "time_mix_ln.weight", D);
    L.ln_x_b = c.vector(p + "time_mix_ln.bias", D);
    L.ffn_lerp_k = c.vector(p + "channel_mix_lerp_k.weight", D);
    L.ffn_key = c.shaped(p + "channel_mix_key.weight", {D, F});
    L.ffn_value = c.shaped(p + "channel_mix_value.weight", {F, D});
  }
  check_tokenizer(f, hp.n_vocab);
  return m;
}

std::vector<const GgufTensor*> Rwkv7Model::tensors_in_forward_order() const {
  std::vector<const GgufTensor*> out{token_embd, emb_norm_w, emb_norm_b};
  for (const Rwkv7Layer& L : layers_) {
    for (const GgufTensor* t :
         {L.attn_norm_w, L.attn_norm_b, L.lerp_fused, L.w0, L.w1, L.w2, L.a0, L.a1, L.a2, L.v0,
          L.v1, L.v2, L.g1, L.g2, L.k_k, L.k_a, L.r_k, L.receptance, L.key, L.value, L.output,
          L.ln_x_w, L.ln_x_b, L.attn_norm2_w, L.attn_norm2_b, L.ffn_lerp_k, L.ffn_key,
          L.ffn_value}) {
      out.push_back(t);
    }
  }
  for (const GgufTensor* t : {out_norm_w, out_norm_b, head}) out.push_back(t);
  return out;
}

}  // namespace rwkvd::engine
