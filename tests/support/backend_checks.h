#pragma once
// The Backend contract (engine/backend.h) checked the same way on every backend: chunking and
// batching change nothing but the order of float additions, a state read/written/copied
// continues bit for bit, and bad input throws without touching any state. Header-only, so the
// support library does not depend on the engine; each test binary links it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/sampler.h"
#include "tests/support/compare.h"
#include "tests/support/fixture_bounds.h"

namespace rwkvd::test {

// Runs one sequence from a fresh state in `slot`; returns its output.
inline std::vector<float> run_one(engine::Backend& b, std::span<const int32_t> toks,
                                  engine::OutputMode mode, uint32_t slot = 0) {
  b.reset_state(slot);
  const engine::SequenceInput in{slot, toks, mode};
  return b.run({&in, 1})[0].data;
}

inline std::vector<float> read_state(engine::Backend& b, uint32_t slot) {
  std::vector<float> s(b.hparams().state_floats());
  b.read_state(slot, s);
  return s;
}

// `toks` through a backend opened with each chunk size (open(chunk)): every position's logits
// and the state left behind agree with the first chunk size's within `tol`.
inline void expect_same_for_any_chunk(
    const std::function<std::unique_ptr<engine::Backend>(uint32_t)>& open,
    std::span<const int32_t> toks, std::initializer_list<uint32_t> chunks, double tol) {
  const int64_t width = 256;  // divides n_vocab and the state of every fixture model
  std::vector<float> ref_logits, ref_state;
  for (const uint32_t chunk : chunks) {
    const auto t0 = std::chrono::steady_clock::now();
    auto b = open(chunk);
    const auto logits = run_one(*b, toks, engine::OutputMode::kAllLogits);
    const auto state = read_state(*b, 0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (ref_logits.empty()) {
      ref_logits = logits;
      ref_state = state;
      std::printf("chunk %u: %.1f s\n", chunk, s);
      continue;
    }
    const auto dl = compare_rows(logits, ref_logits, width);
    const auto ds = compare_rows(state, ref_state, width);
    std::printf("chunk %u: %.1f s\n  logits: %s\n  state: %s\n", chunk, s, dl.str().c_str(),
                ds.str().c_str());
    EXPECT_LT(dl.max_abs, tol) << "chunk " << chunk << ": " << dl.str();
    EXPECT_LT(ds.max_abs, tol) << "chunk " << chunk << ": " << ds.str();
  }
}

// Four sequences of lengths `lens` with four different output modes in one run() agree, in
// output and state, with each run alone (b needs 4 slots).
inline void expect_batch_equals_alone(engine::Backend& b, const size_t (&lens)[4], double tol) {
  using engine::OutputMode;
  const OutputMode modes[4] = {OutputMode::kLastLogits, OutputMode::kAllEmbeddings,
                               OutputMode::kAllLogits, OutputMode::kLastEmbedding};
  std::vector<std::vector<int32_t>> seqs;
  for (size_t i = 0; i < 4; ++i)
    seqs.push_back(long_prompt(lens[i] + 100 * i, b.hparams().n_vocab));
  for (size_t i = 0; i < 4; ++i) seqs[i].resize(lens[i]);
  std::vector<engine::SequenceInput> batch;
  for (uint32_t i = 0; i < 4; ++i) {
    b.reset_state(i);
    batch.push_back({i, seqs[i], modes[i]});
  }
  const auto together = b.run(batch);
  for (uint32_t i = 0; i < 4; ++i) {
    const auto s_batch = read_state(b, i);
    const auto single = run_one(b, seqs[i], modes[i], i);
    const int64_t width = together[i].shape.back();
    const auto d = compare_rows(together[i].data, single, width);
    EXPECT_LT(d.max_abs, tol) << "sequence " << i << ": " << d.str();
    EXPECT_LT(compare_rows(s_batch, read_state(b, i), 256).max_abs, tol) << "state " << i;
  }
}

// kLastArgmax is engine::argmax of the kLastLogits row: three sequences run with every output
// a logits row, then every output an argmax, then the two mixed; the batch's shape is the same
// each time, so are its sums, and every pick must be exact (b needs 3 slots).
inline void expect_argmax_of_last_logits(engine::Backend& b) {
  using engine::OutputMode;
  const uint32_t V = b.hparams().n_vocab;
  std::vector<std::vector<int32_t>> seqs;
  for (const size_t len : {1, 6, 3}) {
    seqs.push_back(long_prompt(len + 50 * seqs.size(), V));
    seqs.back().resize(len);
  }
  auto run = [&](std::initializer_list<OutputMode> modes) {
    std::vector<engine::SequenceInput> batch;
    for (const OutputMode m : modes) {
      const auto i = static_cast<uint32_t>(batch.size());
      b.reset_state(i);
      batch.push_back({i, seqs[i], m});
    }
    return b.run(batch);
  };
  const auto logits =
      run({OutputMode::kLastLogits, OutputMode::kLastLogits, OutputMode::kLastLogits});
  const auto picks =
      run({OutputMode::kLastArgmax, OutputMode::kLastArgmax, OutputMode::kLastArgmax});
  const auto mixed =
      run({OutputMode::kLastArgmax, OutputMode::kLastLogits, OutputMode::kLastArgmax});
  for (size_t i = 0; i < 3; ++i) {
    const int32_t want = engine::argmax(logits[i].data);
    ASSERT_EQ(picks[i].shape, std::vector<int64_t>{1}) << "sequence " << i;
    EXPECT_EQ(static_cast<int32_t>(picks[i].data.at(0)), want) << "sequence " << i;
    if (i == 1) {
      EXPECT_EQ(mixed[i].data, logits[i].data) << "the logits row beside the picks";
    } else {
      EXPECT_EQ(static_cast<int32_t>(mixed[i].data.at(0)), want) << "sequence " << i << ", mixed";
    }
  }
}

// toks[:split] runs in slot 0; its state is read, written to slot 2 and copied to slot 1; then
// toks[split:] runs from slot 0 and from slot 1: the last logits must be bit-identical, and
// slot 0 must read back as zeros once reset. Returns the state after toks[:split] (b needs 3
// slots).
inline std::vector<float> expect_state_round_trip_exact(engine::Backend& b,
                                                        std::span<const int32_t> toks,
                                                        size_t split) {
  using engine::OutputMode;
  run_one(b, toks.first(split), OutputMode::kNone);
  const auto state = read_state(b, 0);
  b.write_state(2, state);
  b.copy_state(2, 1);
  // Slot 0 continues directly, slot 1 from the state that went to the host and back: the same
  // kernels on the same data (a whole-prompt run may pick other kernels for its chunk size, so
  // it is not bit-comparable).
  const engine::SequenceInput direct{0, toks.subspan(split), OutputMode::kLastLogits};
  const auto full = b.run({&direct, 1})[0].data;
  const engine::SequenceInput cont{1, toks.subspan(split), OutputMode::kLastLogits};
  EXPECT_EQ(b.run({&cont, 1})[0].data, full);
  b.reset_state(0);
  EXPECT_EQ(read_state(b, 0), std::vector<float>(state.size()));
  return state;
}

// Token ids out of range, a slot out of range, one slot twice in a batch and state buffers of
// the wrong size throw EngineError, and slot 0's state stays as it was (b needs 2 slots).
inline void expect_rejects_bad_input(engine::Backend& b) {
  using engine::EngineError;
  using engine::OutputMode;
  using engine::SequenceInput;
  const std::vector<int32_t> good{1, 2, 3}, bad{1, static_cast<int32_t>(b.hparams().n_vocab), 3},
      neg{-1};
  run_one(b, good, OutputMode::kNone);
  const auto before = read_state(b, 0);
  const SequenceInput in_bad{0, bad, OutputMode::kLastLogits};
  EXPECT_THROW(b.run({&in_bad, 1}), EngineError);
  const SequenceInput in_neg{0, neg, OutputMode::kLastLogits};
  EXPECT_THROW(b.run({&in_neg, 1}), EngineError);
  const SequenceInput in_slot{b.n_slots(), good, OutputMode::kLastLogits};
  EXPECT_THROW(b.run({&in_slot, 1}), EngineError);
  const SequenceInput twice[2] = {{1, good, OutputMode::kNone}, {1, good, OutputMode::kNone}};
  EXPECT_THROW(b.run(twice), EngineError);
  EXPECT_EQ(read_state(b, 0), before);
  std::vector<float> wrong(10);
  EXPECT_THROW(b.write_state(0, wrong), EngineError);
  EXPECT_THROW(b.copy_state(0, b.n_slots()), EngineError);
}

}  // namespace rwkvd::test
