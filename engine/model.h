#pragma once
// An RWKV-7 model as llama.cpp lays it out in GGUF (arch "rwkv7"): hyper-parameters from the
// metadata and a validated reference to every tensor. Loading checks every shape against the
// metadata, so a backend may index tensors without further checks.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf.h"

namespace rwkvd::engine {

struct Rwkv7Hparams {
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;     // D
  uint32_t head_size = 0;  // N (64 in released models)
  uint32_t n_head = 0;     // H = D / N
  uint32_t n_ffn = 0;      // F
  uint32_t n_vocab = 0;    // V, from token_embd
  uint32_t rank_w = 0, rank_a = 0, rank_v = 0, rank_g = 0;  // LoRA ranks
  float ln_eps = 1e-5f;

  // Floats in one sequence's recurrent state (docs/STATE_LAYOUT.md): per layer (N + 2) rows of D.
  uint64_t state_floats() const { return uint64_t{n_layer} * (head_size + 2) * n_embd; }
  uint64_t state_floats_per_layer() const { return uint64_t{head_size + 2} * n_embd; }
};

// Matrices follow ggml's convention: ne = [in, out]; y = W·x has ne[1] outputs, row o is the
// ne[0] weights of output o.
struct Rwkv7Layer {
  const GgufTensor* attn_norm_w;
  const GgufTensor* attn_norm_b;
  const GgufTensor* attn_norm2_w;
  const GgufTensor* attn_norm2_b;
  const GgufTensor* lerp_fused;  // 6 x D: r, w, k, v, a, g
  const GgufTensor* w0;
  const GgufTensor* w1;
  const GgufTensor* w2;
  const GgufTensor* a0;
  const GgufTensor* a1;
  const GgufTensor* a2;
  const GgufTensor* v0;  // layer 0: present but unused
  const GgufTensor* v1;
  const GgufTensor* v2;
  const GgufTensor* g1;
  const GgufTensor* g2;
  const GgufTensor* k_k;
  const GgufTensor* k_a;
  const GgufTensor* r_k;
  const GgufTensor* receptance;
  const GgufTensor* key;
  const GgufTensor* value;
  const GgufTensor* output;
  const GgufTensor* ln_x_w;
  const GgufTensor* ln_x_b;
  const GgufTensor* ffn_lerp_k;
  const GgufTensor* ffn_key;
  const GgufTensor* ffn_value;
};

class Rwkv7Model {
 public:
  // Opens and validates a GGUF; throws EngineError naming the file and tensor/key at fault.
  static std::shared_ptr<const Rwkv7Model> load(const std::string& path);
  static std::shared_ptr<const Rwkv7Model> from_gguf(std::unique_ptr<GgufFile> file);

  const Rwkv7Hparams& hparams() const { return hp_; }
  const GgufFile& file() const { return *file_; }
  const std::vector<Rwkv7Layer>& layers() const { return layers_; }

  const GgufTensor* token_embd = nullptr;
  const GgufTensor* emb_norm_w = nullptr;
  const GgufTensor* emb_norm_b = nullptr;
  const GgufTensor* out_norm_w = nullptr;
  const GgufTensor* out_norm_b = nullptr;
  const GgufTensor* head = nullptr;

  // Tensors in forward order (embedding, layer 0, ..., head), for the incremental uploader.
  std::vector<const GgufTensor*> tensors_in_forward_order() const;

 private:
  std::unique_ptr<GgufFile> file_;
  Rwkv7Hparams hp_;
  std::vector<Rwkv7Layer> layers_;
};

}  // namespace rwkvd::engine
