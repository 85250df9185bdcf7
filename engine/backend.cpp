#include "engine/backend.h"

#include <string>
#include <unordered_set>

#include "engine/error.h"

namespace rwkvd::engine {

void validate_batch(const Rwkv7Hparams& hp, uint32_t n_slots,
                    std::span<const SequenceInput> batch) {
  std::unordered_set<uint32_t> seen;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceInput& s = batch[i];
    const std::string where = "sequence " + std::to_string(i) + ": ";
    if (s.slot >= n_slots) {
      throw EngineError(where + "state slot " + std::to_string(s.slot) + " is out of range (" +
                        std::to_string(n_slots) + " slots)");
    }
    if (!seen.insert(s.slot).second) {
      throw EngineError(where + "state slot " + std::to_string(s.slot) +
                        " appears twice in one batch");
    }
    if (s.tokens.empty() && s.output != OutputMode::kNone) {
      throw EngineError(where + "no tokens to produce an output from");
    }
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      const int32_t tok = s.tokens[t];
      if (tok < 0 || static_cast<uint32_t>(tok) >= hp.n_vocab) {
        throw EngineError(where + "token " + std::to_string(tok) + " at position " +
                          std::to_string(t) + " is outside the vocabulary [0, " +
                          std::to_string(hp.n_vocab) + ")");
      }
    }
  }
}

}  // namespace rwkvd::engine
