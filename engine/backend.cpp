#include "engine/backend.h"

#include <unistd.h>

#include <string>
#include <unordered_set>

#include "engine/error.h"

namespace rwkvd::engine {

void check_slot_count(const Rwkv7Hparams& hp, uint32_t n_slots) {
  if (n_slots == 0) throw EngineError("need at least one state slot");
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: let the allocation decide
  const uint64_t budget = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
  const uint64_t per_slot = hp.state_floats() * sizeof(float);
  if (per_slot != 0 && n_slots > budget / per_slot) {
    throw EngineError(std::to_string(n_slots) + " state slots of " + std::to_string(per_slot) +
                      " bytes exceed half of this machine's memory (" +
                      std::to_string(budget >> 20) + " MiB); ask for fewer");
  }
}

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
