#pragma once
// Token sampling from logits: repetition penalties, temperature, top-k, top-p, then a draw from
// a seeded generator of our own (xoshiro256**), so a seed gives the same tokens on every
// platform and standard library. Temperature 0 is greedy (argmax, lowest id on ties).
// Candidates go in descending logit order (ties by id), but only as far as the nucleus and the
// draw reach: sorting all 65536 every token cost ~10 ms, several times a decode step.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace rwkvd::engine {

struct SamplingParams {
  float temperature = 1.0f;
  float top_p = 1.0f;              // nucleus mass, (0, 1]
  uint32_t top_k = 0;              // 0 = all tokens
  float presence_penalty = 0.0f;   // subtracted once from every token already generated
  float frequency_penalty = 0.0f;  // subtracted per occurrence
  uint64_t seed = 0;
};

// Index of the largest value, the lowest on ties; NaN never wins (0 if every value is NaN).
// Blocked over 16 running maxima: std::max_element's one dependent compare a value made it ~275
// us a 65536-logit row (2 cores), ~16x this.
int32_t argmax(std::span<const float> v);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Picks the next token from one row of logits (n_vocab floats) and records it for penalties.
  int32_t sample(std::span<const float> logits);
  // Temperature 0: the argmax, ~20 us a row; a draw otherwise, ~1 ms for 65536 tokens.
  bool greedy() const { return p_.temperature <= 0.0f; }
  // Whether the pick is the argmax of the logits as they come (greedy, no penalties): then the
  // engine's own argmax (OutputMode::kLastArgmax) serves, and accept() records it.
  bool picks_argmax() const {
    return greedy() && p_.presence_penalty == 0.0f && p_.frequency_penalty == 0.0f;
  }
  // Records a token for the penalties without sampling (e.g. a forced token).
  void accept(int32_t token) { counts_[token] += 1; }
  uint64_t next_u64();
  double next_unit();  // uniform in [0, 1)

 private:
  int32_t draw();  // temperature > 0: from work_
  SamplingParams p_;
  uint64_t s_[4];
  std::unordered_map<int32_t, uint32_t> counts_;
  std::vector<float> work_;
  std::vector<int32_t> ids_;
};

}  // namespace rwkvd::engine
