// The CPU reference backend: a plain float32 RWKV-7 forward, written to be read next to the
// math in ../shared/fixtures/rwkv7/README.md. All sequences of a chunk share each matrix
// product (every weight row is dequantized once per chunk); the token shift and the WKV
// recurrence run per sequence, token by token.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/backend.h"
#include "engine/cpu/ops.h"
#include "engine/error.h"
#include "engine/sampler.h"

namespace rwkvd::engine {
namespace {

using cpu::ThreadPool;

constexpr float kGroupNormEps = 64e-5f;   // fixed in RWKV-7, not in the metadata
constexpr float kDecayScale = 0.606531f;  // e^-0.5: decay = exp(-e^-0.5 * sigmoid(.)) in (0.545, 1)

struct LayerVectors {
  std::vector<float> attn_norm_w, attn_norm_b, attn_norm2_w, attn_norm2_b, lerp, w0, a0, v0, k_k,
      k_a, r_k, ln_x_w, ln_x_b, ffn_lerp_k;
};

// One sequence's rows inside a chunk.
struct Span {
  uint32_t slot;
  int64_t row0, n;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const Rwkv7Model> model, const BackendOptions& opt)
      : model_(std::move(model)),
        hp_(model_->hparams()),
        opt_(opt),
        pool_(opt.n_threads),
        slots_(opt.n_slots) {
    const auto t0 = std::chrono::steady_clock::now();
    if (opt_.max_chunk == 0) opt_.max_chunk = 1;
    emb_norm_w_ = cpu::to_f32(*model_->emb_norm_w);
    emb_norm_b_ = cpu::to_f32(*model_->emb_norm_b);
    out_norm_w_ = cpu::to_f32(*model_->out_norm_w);
    out_norm_b_ = cpu::to_f32(*model_->out_norm_b);
    for (const Rwkv7Layer& L : model_->layers()) {
      layers_.push_back({cpu::to_f32(*L.attn_norm_w), cpu::to_f32(*L.attn_norm_b),
                         cpu::to_f32(*L.attn_norm2_w), cpu::to_f32(*L.attn_norm2_b),
                         cpu::to_f32(*L.lerp_fused), cpu::to_f32(*L.w0), cpu::to_f32(*L.a0),
                         cpu::to_f32(*L.v0), cpu::to_f32(*L.k_k), cpu::to_f32(*L.k_a),
                         cpu::to_f32(*L.r_k), cpu::to_f32(*L.ln_x_w), cpu::to_f32(*L.ln_x_b),
                         cpu::to_f32(*L.ffn_lerp_k)});
    }
    load_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  const Rwkv7Hparams& hparams() const override { return hp_; }
  std::string device_name() const override {
    return "cpu (" + std::to_string(pool_.size()) + " threads)";
  }
  uint32_t n_slots() const override { return static_cast<uint32_t>(slots_.size()); }
  // The CPU reads weights straight from the mapping: usable as soon as constructed.
  LoadStats load_stats() const override {
    LoadStats s;
    s.usable_ms = s.resident_ms = load_ms_;
    s.weight_bytes = model_->file().file_size();
    for (const auto& slot : slots_) s.state_bytes += slot.size() * sizeof(float);
    return s;
  }

  std::vector<Tensor> run(std::span<const SequenceInput> batch) override {
    validate_batch(hp_, n_slots(), batch);
    for (const SequenceInput& s : batch) slot_ref(s.slot);  // its memory, where first used
    std::vector<Tensor> out(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
      switch (batch[i].output) {
        case OutputMode::kNone:
          break;
        case OutputMode::kLastLogits:
          out[i].shape = {1, hp_.n_vocab};
          break;
        case OutputMode::kAllLogits:
          out[i].shape = {n, hp_.n_vocab};
          break;
        case OutputMode::kLastEmbedding:
          out[i].shape = {1, hp_.n_embd};
          break;
        case OutputMode::kAllEmbeddings:
          out[i].shape = {n, hp_.n_embd};
          break;
        case OutputMode::kLastArgmax:
          out[i].shape = {1};
          break;
      }
      out[i].data.resize(static_cast<size_t>(out[i].numel()));
    }
    // Chunks: up to max_chunk tokens of every unfinished sequence at a time.
    for (size_t done = 0;; done += opt_.max_chunk) {
      std::vector<const SequenceInput*> seqs;
      std::vector<Span> spans;
      std::vector<int32_t> tokens;
      for (const SequenceInput& s : batch) {
        if (s.tokens.size() <= done) continue;
        const size_t n = std::min<size_t>(opt_.max_chunk, s.tokens.size() - done);
        spans.push_back({s.slot, static_cast<int64_t>(tokens.size()), static_cast<int64_t>(n)});
        tokens.insert(tokens.end(), s.tokens.begin() + static_cast<ptrdiff_t>(done),
                      s.tokens.begin() + static_cast<ptrdiff_t>(done + n));
        seqs.push_back(&s);
      }
      if (spans.empty()) break;
      forward_chunk(tokens, spans);
      emit_outputs(batch, seqs, spans, done, out);
    }
    return out;
  }

  void reset_state(uint32_t slot) override { std::ranges::fill(slot_ref(slot), 0.0f); }

  void read_state(uint32_t slot, std::span<float> dst) override {
    const auto& s = slot_ref(slot);
    check_state_size(dst.size());
    std::ranges::copy(s, dst.begin());
  }

  void write_state(uint32_t slot, std::span<const float> src) override {
    auto& s = slot_ref(slot);
    check_state_size(src.size());
    std::ranges::copy(src, s.begin());
  }

  void copy_state(uint32_t src, uint32_t dst) override {
    const auto& s = slot_ref(src);
    slot_ref(dst) = s;
  }

 private:
  std::vector<float>& slot_ref(uint32_t slot) {
    if (slot >= slots_.size()) {
      throw EngineError("state slot " + std::to_string(slot) + " is out of range (" +
                        std::to_string(slots_.size()) + " slots)");
    }
    // A slot takes memory where it is first used, as the zero state.
    if (slots_[slot].empty()) slots_[slot].assign(hp_.state_floats(), 0.0f);
    return slots_[slot];
  }

  void check_state_size(size_t n) const {
    if (n != hp_.state_floats()) {
      throw EngineError("state has " + std::to_string(n) + " floats, the model's has " +
                        std::to_string(hp_.state_floats()));
    }
  }

  // Scratch for a chunk of R rows; resized, never shrunk.
  struct Scratch {
    std::vector<float> x, xa, mix, r, k, v, w, a, g, kk, v_first, y, tmp, lora, ffn;
  };

  void forward_chunk(const std::vector<int32_t>& tokens, const std::vector<Span>& spans) {
    const int64_t R = static_cast<int64_t>(tokens.size());
    const int64_t D = hp_.n_embd, F = hp_.n_ffn;
    Scratch& s = scratch_;
    auto size = [](std::vector<float>& v, int64_t n) { v.resize(static_cast<size_t>(n)); };
    for (auto* v :
         {&s.x, &s.xa, &s.r, &s.k, &s.v, &s.w, &s.a, &s.g, &s.kk, &s.v_first, &s.y, &s.tmp}) {
      size(*v, R * D);
    }
    size(s.mix, 6 * R * D);
    size(s.ffn, R * F);
    const uint32_t max_rank = std::max({hp_.rank_w, hp_.rank_a, hp_.rank_v, hp_.rank_g});
    size(s.lora, R * max_rank);

    // Embedding and its LayerNorm.
    for (int64_t t = 0; t < R; ++t)
      cpu::dequantize_row(*model_->token_embd, tokens[t], &s.x[t * D]);
    cpu::layer_norm(s.x.data(), R, D, emb_norm_w_.data(), emb_norm_b_.data(), hp_.ln_eps,
                    s.x.data());

    for (uint32_t l = 0; l < hp_.n_layer; ++l) {
      time_mix(l, R, spans);
      channel_mix(l, R, spans);
    }
  }

  float* state_row(uint32_t slot, uint32_t layer, uint32_t row) {
    return slots_[slot].data() + layer * hp_.state_floats_per_layer() + uint64_t{row} * hp_.n_embd;
  }

  // xa -> mix rows (xa + (prev - xa) * lerp[i]) for each of `n_lerp` lerps; prev is the
  // previous token's xa, or the state's shift row for a sequence's first token. Saves the
  // last xa of each sequence back into the shift row.
  void token_shift(const std::vector<Span>& spans, uint32_t layer, uint32_t shift_row,
                   const float* xa, const float* lerp, int n_lerp, int64_t R, float* mix) {
    const int64_t D = hp_.n_embd;
    for (const Span& sp : spans) {
      float* shift = state_row(sp.slot, layer, shift_row);
      for (int64_t t = sp.row0; t < sp.row0 + sp.n; ++t) {
        const float* prev = t == sp.row0 ? shift : xa + (t - 1) * D;
        const float* cur = xa + t * D;
        for (int i = 0; i < n_lerp; ++i) {
          float* m = mix + (i * R + t) * D;
          const float* mu = lerp + i * D;
          for (int64_t c = 0; c < D; ++c) m[c] = cur[c] + (prev[c] - cur[c]) * mu[c];
        }
      }
      std::memcpy(shift, xa + (sp.row0 + sp.n - 1) * D, sizeof(float) * D);
    }
  }

  // y = W2 · act(W1 · x), then out = f(base + y) per element, via the lora scratch.
  void lora(const GgufTensor& w1, const GgufTensor& w2, const float* x, int64_t R, float* out,
            float (*act)(float)) {
    cpu::matmul(pool_, w1, x, R, scratch_.lora.data());
    if (act != nullptr) {
      const int64_t n = R * w1.ne[1];
      for (int64_t i = 0; i < n; ++i) scratch_.lora[i] = act(scratch_.lora[i]);
    }
    cpu::matmul(pool_, w2, scratch_.lora.data(), R, out);
  }

  void time_mix(uint32_t l, int64_t R, const std::vector<Span>& spans) {
    const Rwkv7Layer& L = model_->layers()[l];
    const LayerVectors& V = layers_[l];
    Scratch& s = scratch_;
    const int64_t D = hp_.n_embd, N = hp_.head_size, H = hp_.n_head;

    cpu::layer_norm(s.x.data(), R, D, V.attn_norm_w.data(), V.attn_norm_b.data(), hp_.ln_eps,
                    s.xa.data());
    token_shift(spans, l, 0, s.xa.data(), V.lerp.data(), 6, R, s.mix.data());
    const float* xr = &s.mix[0 * R * D];
    const float* xw = &s.mix[1 * R * D];
    const float* xk = &s.mix[2 * R * D];
    const float* xv = &s.mix[3 * R * D];
    const float* xa = &s.mix[4 * R * D];
    const float* xg = &s.mix[5 * R * D];

    cpu::matmul(pool_, *L.receptance, xr, R, s.r.data());
    cpu::matmul(pool_, *L.key, xk, R, s.k.data());
    cpu::matmul(pool_, *L.value, xv, R, s.v.data());

    auto tanh_f = [](float z) { return std::tanh(z); };
    lora(*L.w1, *L.w2, xw, R, s.w.data(), tanh_f);
    for (int64_t i = 0; i < R * D; ++i) {
      s.w[i] = std::exp(-kDecayScale * cpu::sigmoid(V.w0[i % D] + s.w[i]));
    }
    if (l == 0) {
      s.v_first = s.v;
    } else {
      lora(*L.v1, *L.v2, xv, R, s.tmp.data(), nullptr);
      for (int64_t i = 0; i < R * D; ++i) {
        s.v[i] += (s.v_first[i] - s.v[i]) * cpu::sigmoid(V.v0[i % D] + s.tmp[i]);
      }
    }
    lora(*L.a1, *L.a2, xa, R, s.a.data(), nullptr);
    for (int64_t i = 0; i < R * D; ++i) s.a[i] = cpu::sigmoid(V.a0[i % D] + s.a[i]);
    lora(*L.g1, *L.g2, xg, R, s.g.data(), cpu::sigmoid);

    // kk = per-head L2 normalised k*k_k; then k scaled by the in-context learning rate.
    for (int64_t t = 0; t < R; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        float* kk = &s.kk[t * D + h * N];
        const float* k = &s.k[t * D + h * N];
        float norm = 0.0f;
        for (int64_t i = 0; i < N; ++i) {
          kk[i] = k[i] * V.k_k[h * N + i];
          norm += kk[i] * kk[i];
        }
        const float inv = 1.0f / std::max(std::sqrt(norm), 1e-12f);
        for (int64_t i = 0; i < N; ++i) kk[i] *= inv;
      }
    }
    for (int64_t i = 0; i < R * D; ++i) s.k[i] *= 1.0f + (s.a[i] - 1.0f) * V.k_a[i % D];

    wkv(l, spans);

    // GroupNorm per head, then the r·k bonus and the gate.
    for (int64_t t = 0; t < R; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        float* y = &s.y[t * D + h * N];
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < N; ++i) mean += y[i];
        mean /= static_cast<double>(N);
        for (int64_t i = 0; i < N; ++i) var += (y[i] - mean) * (y[i] - mean);
        var /= static_cast<double>(N);
        const double inv = 1.0 / std::sqrt(var + kGroupNormEps);
        float bonus = 0.0f;
        for (int64_t i = 0; i < N; ++i) {
          const int64_t c = t * D + h * N + i;
          bonus += s.r[c] * s.k[c] * V.r_k[h * N + i];
        }
        for (int64_t i = 0; i < N; ++i) {
          const int64_t c = h * N + i;
          const float normed = static_cast<float>((y[i] - mean) * inv) * V.ln_x_w[c] + V.ln_x_b[c];
          y[i] = (normed + s.v[t * D + c] * bonus) * s.g[t * D + c];
        }
      }
    }
    cpu::matmul(pool_, *L.output, s.y.data(), R, s.tmp.data());
    for (int64_t i = 0; i < R * D; ++i) s.x[i] += s.tmp[i];
  }

  // The WKV-7 recurrence, token by token for each sequence and head. State layout: row 1+j,
  // column h*N+i holds S_h[i][j] (i value channel, j key channel), so the inner loops run over
  // contiguous i.
  void wkv(uint32_t l, const std::vector<Span>& spans) {
    Scratch& s = scratch_;
    const int64_t D = hp_.n_embd, N = hp_.head_size, H = hp_.n_head;
    const auto n_spans = spans.size();
    pool_.parallel_for(n_spans * static_cast<size_t>(H), [&](size_t b, size_t e, unsigned) {
      std::vector<float> sa(static_cast<size_t>(N));
      for (size_t job = b; job < e; ++job) {
        const Span& sp = spans[job / static_cast<size_t>(H)];
        const int64_t h = static_cast<int64_t>(job % static_cast<size_t>(H));
        float* S = state_row(sp.slot, l, 1) + h * N;  // S + j*D + i
        for (int64_t t = sp.row0; t < sp.row0 + sp.n; ++t) {
          const int64_t c = t * D + h * N;
          const float *r = &s.r[c], *w = &s.w[c], *k = &s.k[c], *v = &s.v[c], *kk = &s.kk[c],
                      *a = &s.a[c];
          std::fill(sa.begin(), sa.end(), 0.0f);
          for (int64_t j = 0; j < N; ++j) {
            const float* row = S + j * D;
            for (int64_t i = 0; i < N; ++i) sa[i] -= row[i] * kk[j];
          }
          float* y = &s.y[c];
          std::fill(y, y + N, 0.0f);
          for (int64_t j = 0; j < N; ++j) {
            float* row = S + j * D;
            const float b_j = kk[j] * a[j];
            for (int64_t i = 0; i < N; ++i) {
              row[i] = row[i] * w[j] + sa[i] * b_j + v[i] * k[j];
              y[i] += row[i] * r[j];
            }
          }
        }
      }
    });
  }

  void channel_mix(uint32_t l, int64_t R, const std::vector<Span>& spans) {
    const Rwkv7Layer& L = model_->layers()[l];
    const LayerVectors& V = layers_[l];
    Scratch& s = scratch_;
    const int64_t D = hp_.n_embd, F = hp_.n_ffn;
    cpu::layer_norm(s.x.data(), R, D, V.attn_norm2_w.data(), V.attn_norm2_b.data(), hp_.ln_eps,
                    s.xa.data());
    token_shift(spans, l, hp_.head_size + 1, s.xa.data(), V.ffn_lerp_k.data(), 1, R, s.mix.data());
    cpu::matmul(pool_, *L.ffn_key, s.mix.data(), R, s.ffn.data());
    for (int64_t i = 0; i < R * F; ++i) {
      const float z = std::max(s.ffn[i], 0.0f);
      s.ffn[i] = z * z;
    }
    cpu::matmul(pool_, *L.ffn_value, s.ffn.data(), R, s.tmp.data());
    for (int64_t i = 0; i < R * D; ++i) s.x[i] += s.tmp[i];
  }

  // Final norm (and head) for the rows each sequence asked for.
  void emit_outputs(std::span<const SequenceInput> batch,
                    const std::vector<const SequenceInput*>& seqs, const std::vector<Span>& spans,
                    size_t done, std::vector<Tensor>& out) {
    const int64_t D = hp_.n_embd, V = hp_.n_vocab;
    std::vector<float> emb(static_cast<size_t>(D));
    for (size_t i = 0; i < spans.size(); ++i) {
      const SequenceInput& seq = *seqs[i];
      Tensor& dst = out[static_cast<size_t>(&seq - batch.data())];
      const Span& sp = spans[i];
      const bool all =
          seq.output == OutputMode::kAllLogits || seq.output == OutputMode::kAllEmbeddings;
      const bool logits =
          seq.output == OutputMode::kAllLogits || seq.output == OutputMode::kLastLogits;
      if (seq.output == OutputMode::kNone) continue;
      const bool last_chunk = done + static_cast<size_t>(sp.n) == seq.tokens.size();
      if (!all && !last_chunk) continue;
      const int64_t first = all ? 0 : sp.n - 1;
      std::vector<float> rows(static_cast<size_t>((sp.n - first) * D));
      cpu::layer_norm(&scratch_.x[(sp.row0 + first) * D], sp.n - first, D, out_norm_w_.data(),
                      out_norm_b_.data(), hp_.ln_eps, rows.data());
      const int64_t out_row0 = all ? static_cast<int64_t>(done) : 0;
      if (seq.output == OutputMode::kLastArgmax) {
        std::vector<float> row(static_cast<size_t>(V));
        cpu::matmul(pool_, *model_->head, rows.data(), 1, row.data());
        const int32_t id = argmax(row);
        dst.data[0] = argmax_output(id, row[static_cast<size_t>(id)]);
      } else if (logits) {
        cpu::matmul(pool_, *model_->head, rows.data(), sp.n - first, &dst.data[out_row0 * V]);
      } else {
        std::ranges::copy(rows, dst.data.begin() + out_row0 * D);
      }
    }
  }

  std::shared_ptr<const Rwkv7Model> model_;
  Rwkv7Hparams hp_;
  BackendOptions opt_;
  ThreadPool pool_;
  std::vector<std::vector<float>> slots_;  // empty until first used
  std::vector<float> emb_norm_w_, emb_norm_b_, out_norm_w_, out_norm_b_;
  std::vector<LayerVectors> layers_;
  Scratch scratch_;
  double load_ms_ = 0;
};

}  // namespace

// The CPU's steps slow with every sequence they hold: 32 slots where the options leave it (0).
constexpr uint32_t kDefaultCpuSlots = 32;

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Rwkv7Model> model,
                                          BackendOptions options) {
  if (options.n_slots == 0) options.n_slots = kDefaultCpuSlots;
  check_slot_count(model->hparams(), options.n_slots);
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace rwkvd::engine
