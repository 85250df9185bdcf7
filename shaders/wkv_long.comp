#version 450
// The RWKV-7 recurrence for long chunks (prefill): one workgroup per (head, sequence, row slice),
// over blocks of TB tokens, in a software pipeline. While the first rows * P invocations run
// phase B (wkv_core.glsl's recur, token after token, this slice's state rows in registers) over
// block b, the other subgroups run phase A for block b + 1 into the other half of the
// double-buffered shared arrays: a subgroup per token, its lanes taking the head's channels SG
// at a time, so the head's sums need no workgroup barrier. One barrier a block, and phase A's
// memory latencies hide behind phase B (in wkv_sg.comp the two ran one after the other, phase A
// with two barriers a pass).
// Phase C (GroupNorm, bonus, gate) is wkv_out.comp's: phase B writes the raw outputs to y_off,
// phase A v * bonus to v_off (its rows only: another slice may still read the rest).
// The arithmetic is wkv_sg.comp's (wkv_core.glsl), and the head's sums add the same subgroup sums
// in the same order as its token_sum, so a token's numbers do not depend on the kernel.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

// WKV_DIAG (diagnostic builds only, results wrong): 1 leaves phase A out of the loop, 2 phase B,
// to time the other alone.
#ifndef WKV_DIAG
#define WKV_DIAG 0
#endif

layout(local_size_x_id = 0) in;              // > NS * P: phase B's invocations and phase A's
layout(constant_id = 1) const uint NS = 64;  // head size
layout(constant_id = 2) const uint TB = 8;   // tokens per block
// The device's subgroup size (<= NS): gl_SubgroupSize, which Vulkan fixes to the device's
// subgroupSize for SPIR-V before 1.6 without the varying-size flag (this build: vulkan1.2).
layout(constant_id = 3) const uint SG = 32;

#include "wkv_push.glsl"

// [buffer][token of the block][channel]
shared float s_w[2 * TB * NS], s_kk[2 * TB * NS], s_ka[2 * TB * NS], s_k[2 * TB * NS],
    s_r[2 * TB * NS], s_v[2 * TB * NS];
#include "wkv_core.glsl"

const uint PER = NS / SG;  // channels a lane of phase A takes
float prm[PER][6];         // their w0, a0, v0, k_k, k_a, r_k

// Phase A of the nb tokens from chunk token t0 into buffer buf, by phase A's subgroup a of na.
void phase_a(uint t0, uint nb, uint buf, uint h, uint row0, uint rows, uint a, uint na) {
  const uint lane = gl_SubgroupInvocationID;
  for (uint tt = a; tt < nb; tt += na) {
    const uint to = (t0 + tt) * pc.D + h * NS;
    WkvIn in_[PER];
    vec2 sums = vec2(0);  // over the head, as token_sum adds them
    [[unroll]] for (uint q = 0; q < PER; ++q) {
      const uint c = q * SG + lane, o = to + c;
      in_[q] = wkv_in(o, c - row0 < rows, act[pc.wl_off + o], act[pc.al_off + o],
                      act[pc.vl_off + o], prm[q]);
      sums += subgroupAdd(vec2(in_[q].kr * in_[q].kr, in_[q].bonus));
    }
    [[unroll]] for (uint q = 0; q < PER; ++q) {
      const uint c = q * SG + lane;
      wkv_stage(buf * TB + tt, c, in_[q], in_[q].kr / max(sqrt(sums.x), 1e-12));
      if (c - row0 < rows) act[pc.v_off + to + c] = wkv_value_bonus(in_[q].v, sums.y);
    }
  }
}

void main() {
  const uint h = gl_WorkGroupID.x, seq = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint slices = max(1u, (pc.flags >> 16) & 0xffu), rows = NS / slices;
  const uint row0 = gl_WorkGroupID.z * rows;
  const uint first = meta[pc.meta_seq + 4 * seq + 1], n = meta[pc.meta_seq + 4 * seq + 2];
  // Phase B: invocation (row, part) of this slice's rows; phase A: the subgroups after them.
  // Whole subgroups (the host keeps rows * P a multiple of SG), so that the branch around phase
  // B's shuffles is uniform in every subgroup.
  const uint b_subgroups = rows * P / SG;
  const bool b_lane = gl_SubgroupID < b_subgroups;
  const uint row = row0 + tid / P, part = tid % P;
  const bool a_lane = !b_lane;
  const uint a = gl_SubgroupID - b_subgroups, na = gl_NumSubgroups - b_subgroups;
  if (a_lane) {
    [[unroll]] for (uint q = 0; q < PER; ++q) {
      wkv_params(h * NS + q * SG + gl_SubgroupInvocationID, prm[q]);
    }
    phase_a(first, min(TB, n), 0u, h, row0, rows, a, na);
  }
  const uint sb = seq_state_base(seq);
  if (b_lane) load_rows(sb, h, row, part);
  barrier();
  const uint blocks = (n + TB - 1u) / TB;
  for (uint b = 0; b < blocks; ++b) {
    const uint buf = b & 1u, b0 = b * TB;
    if (b_lane && WKV_DIAG != 2) {
      for (uint tt = 0; tt < min(TB, n - b0); ++tt) {
        const float y = recur(buf * TB + tt, row, part);
        if (part == 0) act[pc.y_off + (first + b0 + tt) * pc.D + h * NS + row] = y;
      }
    } else if (a_lane && b + 1u < blocks && WKV_DIAG != 1) {
      phase_a(first + b0 + TB, min(TB, n - b0 - TB), buf ^ 1u, h, row0, rows, a, na);
    }
    barrier();  // block b + 1 staged; block b's buffer free for block b + 2
  }
  if (b_lane) store_rows(sb, h, row, part);
}
