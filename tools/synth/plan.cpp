#include "tools/synth/plan.h"

#include <cmath>

#include "tools/synth/rng.h"
#include "tools/synth/type_choice.h"

namespace rwkvd::tools::synth {
namespace {

// Scales are chosen so that a random model behaves like a trained one numerically: every
// activation stays O(1) through any number of layers and tokens, and the logits have a
// standard deviation of about 3 (not flat, not saturated). A matrix y = W x with ne = [in, out]
// and x of unit scale (LayerNorm'd) gets N(0, g / sqrt(in)), g the gain it should have.
Init normal(float mean, float std) {
  return {Init::Kind::kNormal, mean, std, {}};
}
Init uniform(float lo, float hi) {
  return {Init::Kind::kUniform, lo, hi, {}};
}
Init matrix(int64_t in, float gain) {
  return normal(0.0f, gain / std::sqrt(static_cast<float>(in)));
}
// LayerNorm / GroupNorm affine parameters: near the identity.
Init norm_weight() {
  return normal(1.0f, 0.1f);
}
Init norm_bias() {
  return normal(0.0f, 0.05f);
}

class Planner {
 public:
  explicit Planner(const SynthConfig& cfg) : cfg_(cfg) {}

  void add(std::string name, std::vector<int64_t> ne, Init init, std::string stream = {}) {
    PlannedTensor t;
    t.type = tensor_type(cfg_.type, name, ne);
    init.stream = stream.empty() ? name : std::move(stream);
    t.name = std::move(name);
    t.ne = std::move(ne);
    t.init = std::move(init);
    out_.push_back(std::move(t));
  }
  std::vector<PlannedTensor> take() { return std::move(out_); }

 private:
  const SynthConfig& cfg_;
  std::vector<PlannedTensor> out_;
};

}  // namespace

std::vector<PlannedTensor> plan_tensors(const SynthConfig& cfg) {
  const int64_t D = cfg.embd, V = cfg.vocab, F = cfg.n_ffn();
  const LoraRanks r = cfg.ranks();
  const int64_t Rw = r.w, Ra = r.a, Rv = r.v, Rg = r.g;
  Planner p(cfg);
  // ln0 normalises the embedding row, so its scale is free; it only has to stay far above
  // LayerNorm's eps (1e-5) for the normalisation to be meaningful.
  p.add("token_embd.weight", {D, V}, uniform(-0.5f, 0.5f));
  p.add("token_embd_norm.weight", {D}, norm_weight());
  p.add("token_embd_norm.bias", {D}, norm_bias());
  for (uint32_t l = 0; l < cfg.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.add(b + "attn_norm.weight", {D}, norm_weight());
    p.add(b + "attn_norm.bias", {D}, norm_bias());
    p.add(b + "attn_norm_2.weight", {D}, norm_weight());
    p.add(b + "attn_norm_2.bias", {D}, norm_bias());
    // Token-shift interpolation factors live in (0, 1).
    p.add(b + "time_mix_lerp_fused.weight", {D, 1, 1, 6}, uniform(0.0f, 1.0f));
    // Decay w = exp(-e^-0.5 * sigmoid(w0 + w2 tanh(w1 x))) lies in (0.545, 1) whatever the
    // weights, so the state cannot blow up; w0 spread over (-3, 1) mixes long memories
    // (w ~ 0.97) with short ones (w ~ 0.6), and the LoRA moves it by about +-0.5.
    p.add(b + "time_mix_w0.weight", {D}, uniform(-3.0f, 1.0f));
    p.add(b + "time_mix_w1.weight", {D, Rw}, matrix(D, 0.5f));
    p.add(b + "time_mix_w2.weight", {Rw, D}, matrix(Rw, 0.5f));
    // In-context learning rate a = sigmoid(a0 + a2 a1 x): centred on 0.5.
    p.add(b + "time_mix_a0.weight", {D}, normal(0.0f, 0.3f));
    p.add(b + "time_mix_a1.weight", {D, Ra}, matrix(D, 1.0f));
    p.add(b + "time_mix_a2.weight", {Ra, D}, matrix(Ra, 0.5f));
    if (l == 0) {
      // Layer 0 has no value residual; like the converter, store copies of a0/a1/a2.
      p.add(b + "time_mix_v0.weight", {D}, normal(0.0f, 0.3f), b + "time_mix_a0.weight");
      p.add(b + "time_mix_v1.weight", {D, Ra}, matrix(D, 1.0f), b + "time_mix_a1.weight");
      p.add(b + "time_mix_v2.weight", {Ra, D}, matrix(Ra, 0.5f), b + "time_mix_a2.weight");
    } else {
      // Value-residual mix sigmoid(v0 + v2 v1 x): centred on 0.5.
      p.add(b + "time_mix_v0.weight", {D}, normal(0.0f, 0.3f));
      p.add(b + "time_mix_v1.weight", {D, Rv}, matrix(D, 1.0f));
      p.add(b + "time_mix_v2.weight", {Rv, D}, matrix(Rv, 0.5f));
    }
    // Gate g = g2 sigmoid(g1 x): sigmoid outputs are not centred, so the sum over the rank has
    // a spread of about gain * sqrt(0.3); gain 2 gives gates of order 1.
    p.add(b + "time_mix_g1.weight", {D, Rg}, matrix(D, 1.0f));
    p.add(b + "time_mix_g2.weight", {Rg, D}, matrix(Rg, 2.0f));
    // kk = normalise(k * k_k) per head; k is rescaled by 1 + (a - 1) k_a. Trained models have
    // k_k near 0.85 and k_a near 1.
    p.add(b + "time_mix_k_k.weight", {D}, uniform(0.7f, 1.0f));
    p.add(b + "time_mix_k_a.weight", {D}, uniform(0.8f, 1.2f));
    // The per-head bonus v * sum(r k r_k) sums N products: keep r_k small so it does not
    // dominate the normalised wkv output.
    p.add(b + "time_mix_r_k.weight", {D}, normal(0.0f, 0.1f));
    p.add(b + "time_mix_receptance.weight", {D, D}, matrix(D, 1.0f));
    p.add(b + "time_mix_key.weight", {D, D}, matrix(D, 1.0f));
    p.add(b + "time_mix_value.weight", {D, D}, matrix(D, 1.0f));
    // Residual branches write with gain 0.5 so the residual stream grows slowly with depth.
    p.add(b + "time_mix_output.weight", {D, D}, matrix(D, 0.5f));
    p.add(b + "time_mix_ln.weight", {D}, norm_weight());
    p.add(b + "time_mix_ln.bias", {D}, norm_bias());
    p.add(b + "channel_mix_lerp_k.weight", {D}, uniform(0.0f, 1.0f));
    p.add(b + "channel_mix_key.weight", {D, F}, matrix(D, 1.0f));
    p.add(b + "channel_mix_value.weight", {F, D}, matrix(F, 0.5f));
  }
  p.add("output_norm.weight", {D}, norm_weight());
  p.add("output_norm.bias", {D}, norm_bias());
  // The final LayerNorm gives a row of norm ~sqrt(D): gain 3 makes logits of std ~3.
  p.add("output.weight", {D, V}, matrix(D, 3.0f));
  return p.take();
}

void fill_values(const Init& init, uint64_t seed, uint64_t first, std::span<float> out) {
  const TensorRng rng(seed, init.stream);
  if (init.kind == Init::Kind::kNormal) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = init.a + init.b * rng.normal(first + i);
  } else {
    const float span = init.b - init.a;
    for (size_t i = 0; i < out.size(); ++i) out[i] = init.a + span * rng.uniform(first + i);
  }
}

}  // namespace rwkvd::tools::synth
