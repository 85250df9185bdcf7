// embed (dequantized row + LayerNorm), shift (LN + token shift + lerps) and out_ln (LN, commit,
// int8 form) against straightforward CPU loops on random data; argmax against engine::argmax on
// rows made to hold ties, NaN and infinities.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/error.h"
#include "engine/sampler.h"
#include "tests/vk/q8_check.h"
#include "tests/vk/vk_harness.h"

namespace rwkvd::test {
namespace {

using engine::vk::Device;
using engine::vk::Tuning;

std::vector<float> layer_norm(const float* x, const float* w, const float* b, uint32_t D,
                              float eps) {
  double mu = 0, var = 0;
  for (uint32_t c = 0; c < D; ++c) mu += x[c];
  mu /= D;
  for (uint32_t c = 0; c < D; ++c) var += (x[c] - mu) * (x[c] - mu);
  var /= D;
  std::vector<float> y(D);
  for (uint32_t c = 0; c < D; ++c) {
    y[c] = static_cast<float>((x[c] - mu) / std::sqrt(var + eps) * w[c] + b[c]);
  }
  return y;
}

TEST(VkRowKernels, EmbedIsRowThenLayerNorm) {
  VkRig rig;
  const uint64_t errors = Device::validation_errors();
  const uint32_t D = 256, V = 10, T = 3;
  const std::vector<float> table = random_floats(D * V, 1, -2, 3);
  const std::vector<float> nw = random_floats(D, 2), nb = random_floats(D, 3);
  rig.make(rig.weights[0], D * V);
  std::memcpy(rig.weights[0].mapped(), table.data(), table.size() * 4);
  rig.make(rig.vecs, 2 * D);
  std::memcpy(rig.ptr<float>(rig.vecs), nw.data(), D * 4);
  std::memcpy(rig.ptr<float>(rig.vecs) + D, nb.data(), D * 4);
  rig.make(rig.meta, 4 * T);
  const uint32_t toks[T] = {7, 0, 9};
  for (uint32_t t = 0; t < T; ++t) rig.ptr<uint32_t>(rig.meta)[4 * t] = toks[t];
  rig.make(rig.act, T * D);
  rig.make(rig.state, 4);
  const VkDescriptorSet set = rig.set();
  rig.run([&](VkCommandBuffer cb) {
    rig.kernels->embed(cb, set, engine::GgmlType::F32, {D, D * 4, 0, 0, D, 1e-5f}, T);
  });
  for (uint32_t t = 0; t < T; ++t) {
    const std::vector<float> want = layer_norm(&table[toks[t] * D], nw.data(), nb.data(), D, 1e-5f);
    for (uint32_t c = 0; c < D; ++c) {
      ASSERT_NEAR(rig.ptr<float>(rig.act)[t * D + c], want[c], 1e-5) << "t=" << t << " c=" << c;
    }
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

// Rows of n = 3000 (three parts, the last short): the argmax.comp parts merged on the host give
// engine::argmax's pick, the lowest index of the largest value, wherever the ties and NaNs fall.
TEST(VkRowKernels, ArgmaxPicksTheLowestIndexOfTheLargest) {
  VkRig rig;
  const uint64_t errors = Device::validation_errors();
  const uint32_t n = 3000, src = 8;  // rows start past an offset, as the logits region does
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<std::vector<float>> rows;
  auto row = [&](uint32_t seed) { return random_floats(n, seed, -8, 8); };
  rows.push_back(row(1));  // a plain random row
  auto tie = row(2);       // the largest value three times, in different parts; NaN beside them
  tie[2999] = tie[1500] = tie[1025] = 9.5f;
  tie[0] = nan;
  rows.push_back(tie);
  auto same_part = row(3);  // a tie inside one part, the later one seen first by its lane
  same_part[700] = same_part[444] = 20.0f;
  rows.push_back(same_part);
  auto first_part_nan = row(4);  // a whole part NaN
  std::fill(first_part_nan.begin(), first_part_nan.begin() + 1024, nan);
  rows.push_back(first_part_nan);
  rows.push_back(std::vector<float>(n, nan));   // every value NaN: 0
  rows.push_back(std::vector<float>(n, -inf));  // every value -inf: the first
  auto zeros = std::vector<float>(n, -1.0f);    // -0 and +0 compare equal: the first of them
  zeros[2100] = 0.0f;
  zeros[1800] = -0.0f;
  rows.push_back(zeros);
  auto top = row(5);  // +inf wins over any finite value
  top[2048] = inf;
  rows.push_back(top);
  const uint32_t R = static_cast<uint32_t>(rows.size());
  const uint32_t parts = engine::vk::Kernels::argmax_parts(n), dst = src + R * n;
  ASSERT_EQ(parts, 3u);
  rig.make(rig.act, dst + 2 * parts * R);
  for (uint32_t r = 0; r < R; ++r) {
    std::memcpy(rig.ptr<float>(rig.act) + src + r * n, rows[r].data(), n * 4);
  }
  rig.make(rig.meta, 4);
  rig.make(rig.vecs, 4);
  rig.make(rig.state, 4);
  const VkDescriptorSet set = rig.set();
  rig.run([&](VkCommandBuffer cb) { rig.kernels->argmax(cb, set, n, R, src, dst); });
  const int32_t want[] = {
      engine::argmax(rows[0]), 1025, 444, engine::argmax(rows[3]), 0, 0, 1800, 2048};
  for (uint32_t r = 0; r < R; ++r) {
    ASSERT_EQ(engine::argmax(rows[r]), want[r]) << "row " << r;  // the reference's own rule
    const uint32_t* pairs = rig.ptr<uint32_t>(rig.act) + dst + 2 * parts * r;
    EXPECT_EQ(engine::vk::Kernels::argmax_of_parts(pairs, parts), want[r]) << "row " << r;
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

}  // namespace
}  // namespace rwkvd::test

namespace rwkvd::test {
namespace {

void check_shift(bool forms, bool slices);

// out_ln: the LayerNorm of each output row (the batch description's out rows pick tokens of x),
// each sequence's pending channel-mix shift (its last token's) committed into its slot, and with
// subgroups the rows' int8 form too, which the variant without them refuses.
void check_out_ln(bool forms) {
  VkRig rig([&](Tuning& t) { t.subgroups = forms; });
  const uint64_t errors = Device::validation_errors();
  const uint32_t D = 96, T = 5, n_out = 3, slot_floats = 4 * D, commit_row = 2 * D;
  const uint32_t seq_slot[2] = {1, 0}, seq_first[2] = {0, 3}, seq_n[2] = {3, 2};
  const uint32_t out_tok[n_out] = {4, 1, 2};
  rig.make(rig.meta, 4 * T + 8 + n_out);
  auto* meta = rig.ptr<uint32_t>(rig.meta);
  for (uint32_t s = 0; s < 2; ++s) {
    meta[4 * T + 4 * s] = seq_slot[s];
    meta[4 * T + 4 * s + 1] = seq_first[s];
    meta[4 * T + 4 * s + 2] = seq_n[s];
  }
  for (uint32_t i = 0; i < n_out; ++i) meta[4 * T + 8 + i] = out_tok[i];
  const std::vector<float> vec = random_floats(2 * D, 7);  // norm w, norm b
  rig.make(rig.vecs, vec.size());
  std::memcpy(rig.vecs.mapped(), vec.data(), vec.size() * 4);
  const std::vector<float> state0 = random_floats(2 * slot_floats, 8);
  rig.make(rig.state, state0.size());
  std::memcpy(rig.state.mapped(), state0.data(), state0.size() * 4);
  // act: x [T][D], embd [n_out][D], the commit source [T][D], embd's int8 form [n_out] rows
  const uint32_t embd_off = T * D, src_off = embd_off + n_out * D, q8_off = src_off + T * D;
  const std::vector<float> act0 = random_floats(q8_off, 9, -3, 3);
  rig.make(rig.act, q8_off + n_out * engine::vk::q8_row_floats(D));
  std::memcpy(rig.act.mapped(), act0.data(), act0.size() * 4);
  const VkDescriptorSet set = rig.set();
  engine::vk::OutLnArgs a{D,     0,         embd_off,    0,       D,          n_out, 2,
                          4 * T, 4 * T + 8, slot_floats, src_off, commit_row, 1e-5f};
  ASSERT_EQ(rig.kernels->out_ln_writes_q8(D), forms);
  if (forms) a.q8_off = q8_off;
  rig.run([&](VkCommandBuffer cb) { rig.kernels->out_ln(cb, set, a); });
  if (!forms) {
    engine::vk::OutLnArgs b = a;
    b.q8_off = q8_off;
    EXPECT_THROW(rig.kernels->out_ln(VK_NULL_HANDLE, set, b), engine::EngineError);
  }
  const float* act = rig.ptr<float>(rig.act);
  for (uint32_t i = 0; i < n_out; ++i) {
    const auto want = layer_norm(&act0[out_tok[i] * D], &vec[0], &vec[D], D, 1e-5f);
    for (uint32_t c = 0; c < D; ++c) {
      ASSERT_NEAR(act[embd_off + i * D + c], want[c], 1e-5) << "row " << i << " channel " << c;
    }
  }
  const float* st = rig.ptr<float>(rig.state);
  for (uint32_t s = 0; s < 2; ++s) {
    const uint32_t last = seq_first[s] + seq_n[s] - 1;
    for (uint32_t f = 0; f < slot_floats; ++f) {
      const bool committed = f >= commit_row && f < commit_row + D;
      const float want = committed ? act0[src_off + last * D + f - commit_row]
                                   : state0[seq_slot[s] * slot_floats + f];
      ASSERT_EQ(st[seq_slot[s] * slot_floats + f], want) << "sequence " << s << " float " << f;
    }
  }
  if (forms) {
    SCOPED_TRACE("embd's int8 form");
    std::vector<float> xq(n_out * D);
    check_q8_form(rig.ptr<std::byte>(rig.act), q8_off, act + embd_off, xq.data(), n_out, D);
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

TEST(VkRowKernels, OutLnNormsRowsCommitsAndWritesTheirInt8Form) {
  for (const bool subgroups : {true, false}) {
    SCOPED_TRACE(subgroups ? "subgroups" : "no subgroups");
    check_out_ln(subgroups);
    if (HasFatalFailure()) return;
  }
}

// Two sequences (slots 1 and 0) of 3 and 2 tokens: LayerNorm, token shift from the slot's row
// at each sequence's first position and from the previous token after, six lerps, the saved
// xn, and the commit of another buffer's last-token row into the state.
TEST(VkRowKernels, ShiftNormsShiftsLerpsAndCommits) {
  // One workgroup per token (CPU devices) and a token's channels spread over several (GPUs);
  // LayerNorm sums through subgroups (shift_sg) and through the workgroup tree (no subgroups).
  // Only shift_sg writes the int8 and fp16 forms (their runs gather by shuffles): the products
  // that read them need subgroups anyway.
  for (const bool subgroups : {true, false}) {
    for (const bool slices : {false, true}) {
      SCOPED_TRACE(std::string(slices ? "row slices" : "a workgroup a token") +
                   (subgroups ? ", subgroups" : ", no subgroups"));
      check_shift(subgroups, slices);
      if (HasFatalFailure()) return;
    }
  }
}

void check_shift(bool forms, bool slices) {
  VkRig rig([&](Tuning& t) {
    t.subgroups = forms;
    t.row_slices = slices;
  });
  const uint64_t errors = Device::validation_errors();
  const uint32_t D = 96, T = 5, slot_floats = 4 * D, state_row = D, commit_row = 3 * D;
  const uint32_t seq_slot[2] = {1, 0}, seq_first[2] = {0, 3}, seq_n[2] = {3, 2};
  rig.make(rig.meta, 4 * T + 8);
  auto* meta = rig.ptr<uint32_t>(rig.meta);
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t j = 0; j < seq_n[s]; ++j) {
      meta[4 * (seq_first[s] + j) + 1] = s;
      meta[4 * (seq_first[s] + j) + 2] = j;
    }
    meta[4 * T + 4 * s] = seq_slot[s];
    meta[4 * T + 4 * s + 1] = seq_first[s];
    meta[4 * T + 4 * s + 2] = seq_n[s];
  }
  const std::vector<float> vec = random_floats(8 * D, 4);  // norm w, norm b, 6 lerps
  rig.make(rig.vecs, vec.size());
  std::memcpy(rig.vecs.mapped(), vec.data(), vec.size() * 4);
  const std::vector<float> state0 = random_floats(2 * slot_floats, 5);
  rig.make(rig.state, state0.size());
  std::memcpy(rig.state.mapped(), state0.data(), state0.size() * 4);
  // act: x [T][D], out 6 x [T][D], save [T][D], commit source [T][D], then the int8 forms of
  // the outputs 6 x [T][q8_row_floats(D)] (outputs 0, 2 and 3 asked for, as for r, k, v)
  const uint32_t x_off = 0, out_off = T * D, save_off = 7 * T * D, src_off = 8 * T * D;
  const uint32_t q8_off = 9 * T * D, q8_stride = T * engine::vk::q8_row_floats(D);
  const uint32_t q8_mask = forms ? 0b1101 : 0;
  // ... then the fp16 forms (h16.comp's) of outputs 1 and 5, 6 x [T][D / 2] words, and room
  // for h16.comp's own of the same outputs.
  const uint32_t h16_off = q8_off + 6 * q8_stride, h16_stride = T * D / 2,
                 h16_mask = forms ? 0b100010 : 0;
  const uint32_t ref_off = h16_off + 6 * h16_stride;
  const std::vector<float> act0 = random_floats(9 * T * D, 6, -2, 2);
  rig.make(rig.act, ref_off + 6 * h16_stride);
  std::memcpy(rig.act.mapped(), act0.data(), act0.size() * 4);
  const VkDescriptorSet set = rig.set();
  const engine::vk::ShiftArgs a{D,         6,          x_off,   out_off,   T * D,       save_off,
                                0,         D,          2 * D,   state_row, slot_floats, 1,
                                src_off,   commit_row, 4 * T,   1e-5f,     q8_mask,     q8_off,
                                q8_stride, h16_mask,   h16_off, h16_stride};
  rig.run([&](VkCommandBuffer cb) { rig.kernels->shift(cb, set, a, T); });
  if (!forms) {  // and the variant without subgroups refuses to write them
    engine::vk::ShiftArgs b = a;
    b.q8_mask = 0b1;
    EXPECT_THROW(rig.kernels->shift(VK_NULL_HANDLE, set, b, T), engine::EngineError);
  }
  const float* act = rig.ptr<float>(rig.act);
  const float* st = rig.ptr<float>(rig.state);
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t j = 0; j < seq_n[s]; ++j) {
      const uint32_t t = seq_first[s] + j;
      const auto xn = layer_norm(&act0[t * D], &vec[0], &vec[D], D, 1e-5f);
      const auto prev = j == 0
                            ? std::vector<float>(&state0[seq_slot[s] * slot_floats + state_row],
                                                 &state0[seq_slot[s] * slot_floats + state_row + D])
                            : layer_norm(&act0[(t - 1) * D], &vec[0], &vec[D], D, 1e-5f);
      for (uint32_t c = 0; c < D; ++c) {
        ASSERT_NEAR(act[save_off + t * D + c], xn[c], 1e-5);
        for (uint32_t i = 0; i < 6; ++i) {
          const float want = xn[c] + (prev[c] - xn[c]) * vec[(2 + i) * D + c];
          ASSERT_NEAR(act[out_off + i * T * D + t * D + c], want, 1e-5) << "t " << t << " i " << i;
        }
      }
    }
    const uint32_t last = seq_first[s] + seq_n[s] - 1;
    for (uint32_t c = 0; c < D; ++c) {
      EXPECT_EQ(st[seq_slot[s] * slot_floats + commit_row + c], act0[src_off + last * D + c]);
      EXPECT_EQ(st[seq_slot[s] * slot_floats + state_row + c],
                state0[seq_slot[s] * slot_floats + state_row + c]);  // read, never written
    }
  }
  // The int8 forms of the outputs asked for, and nothing where none was.
  for (uint32_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("int8 form of output " + std::to_string(i));
    const uint32_t q = q8_off + i * q8_stride;
    if ((q8_mask >> i) & 1u) {
      std::vector<float> xq(T * D);
      check_q8_form(rig.ptr<std::byte>(rig.act), q, act + out_off + i * T * D, xq.data(), T, D);
      if (::testing::Test::HasFatalFailure()) return;
    } else {
      EXPECT_TRUE(std::all_of(act + q, act + q + q8_stride, [](float v) { return v == 0.0f; }));
    }
  }
  // The fp16 forms asked for: the very words h16.comp writes from the float outputs.
  std::vector<engine::vk::Kernels::HalfRegion> regions;
  for (uint32_t i = 0; i < 6; ++i)
    regions.push_back({D, out_off + i * T * D, ref_off + i * h16_stride});
  rig.run([&](VkCommandBuffer cb) { rig.kernels->to_half(cb, set, T, regions); });
  const auto* words = rig.ptr<uint32_t>(rig.act);
  for (uint32_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("fp16 form of output " + std::to_string(i));
    for (uint32_t w = 0; w < h16_stride; ++w) {
      const uint32_t want = ((h16_mask >> i) & 1u) ? words[ref_off + i * h16_stride + w] : 0u;
      ASSERT_EQ(words[h16_off + i * h16_stride + w], want) << "word " << w;
    }
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

}  // namespace
}  // namespace rwkvd::test
