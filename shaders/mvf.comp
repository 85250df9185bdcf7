#version 450
// Float weights (F32, F16, BF16) at one token: y[o] = epilogue(sum_i W[o][i] * x[i]), up to four
// weights of one type per dispatch (gl_WorkGroupID.z). Bandwidth bound: the neighbouring lanes of
// a row's team read neighbouring 16-byte words (each load instruction of a subgroup covers 512
// contiguous bytes), U words a lane per row in flight before any is used. mv.comp's 32-weight
// pieces suit the K-quant blocks but give float rows strided loads (a lane's 64 or 128 bytes
// apart from its neighbour's) and, at four rows a subgroup, so many registers that few warps fit.
// A row's team is KS subgroups (their sums meet in shared memory): few-row products (the LoRA
// down products' 576 rows) then still spread over the GPU. x is read from the activations (a
// token's row is L1-resident). Each row's sum runs in one order, fixed by the pipeline.
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef LN_PROLOGUE
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint U = 4;   // 16-byte words a lane per row in flight
layout(constant_id = 2) const uint R = 1;   // rows a team, <= 4
layout(constant_id = 3) const uint KS = 1;  // subgroups a team (a row's K split over them)

// [subgroup][row], for KS > 1. Its size is a measured setting, not only storage: shared memory
// bounds the workgroups an SM holds, which spreads a small grid (the LoRA down products' 576
// workgroups) over more SMs. H100, 2.9B gen-1 tok/s with 1 KB (this) / sized to the workgroup
// (16 bytes, none at KS = 1) / 4 KB: Q4_K_M 397 / 361 / -, F16 301 / 298 / 263.
shared float team_sums[kMaxWg / 4u][4];

#include "product.glsl"

#ifdef LN_PROLOGUE
// A product of one decoded token with its shift in front (mvf_ln_*, a pipeline of its own;
// shift_front.glsl): each workgroup makes its input's floats in shared memory and reads them
// there (the F32 LoRA down products of a model with short rows).
layout(constant_id = 4) const uint LNL = 256;  // shift.comp's workgroup (Kernels::row_wg_)
layout(constant_id = 5) const uint LNQ = 3;    // quads a lane of those holds (row_quads())
layout(constant_id = 6) const uint KMAX = 2560;
shared vec4 s_x4[KMAX / 4u];
void front_store(uint q, vec4 v, bool live) {
  if (live) s_x4[q] = v;
}
#include "shift_front.glsl"
// The input's vec4 i (from the row's element 0). A macro, not a function: unoptimised SPIR-V
// keeps a function as a call with its arguments stored through memory, and NVIDIA's compiler
// then made the plain products of 2.9B F16 ~10% slower (H200). i stays unparenthesised below: the
// plain variants' SPIR-V is then byte-identical to the one measured fast.
#define X_IN(x4, i) s_x4[i]
#else
#define X_IN(x4, i) act4[x4 + i]
#endif

#if defined(WTYPE_F32)
const uint kPerWord = 4u;
#else
const uint kPerWord = 8u;
#endif

// The dot product of 16-byte word u of a row with x's matching floats (x4: x's vec4 index of
// the row's element 0).
float dot_word(uvec4 q, uint x4, uint u) {
#if defined(WTYPE_F32)
  return dot(uintBitsToFloat(q), X_IN(x4, u));
#elif defined(WTYPE_F16)
  return dot(vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y)), X_IN(x4, 2u * u)) +
         dot(vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w)), X_IN(x4, 2u * u + 1u));
#else  // BF16
  return dot(uintBitsToFloat(uvec4(q.x << 16, q.x & 0xffff0000u, q.y << 16, q.y & 0xffff0000u)),
             X_IN(x4, 2u * u)) +
         dot(uintBitsToFloat(uvec4(q.z << 16, q.z & 0xffff0000u, q.w << 16, q.w & 0xffff0000u)),
             X_IN(x4, 2u * u + 1u));
#endif
}

void main() {
  const uint s = gl_WorkGroupID.z;
  const uint K = pc.K[s], N = pc.N[s];
  const uint words = K / kPerWord, rw = pc.row_bytes[s] / 16u, x4 = pc.x_off[s] / 4u;
#ifdef LN_PROLOGUE
  shift_front(K, pc.x_off[s]);  // (x_off: the slot's lerp, a vecs offset)
#endif
  const uint team = KS * gl_SubgroupSize, part = gl_SubgroupID % KS;
  const uint j = part * gl_SubgroupSize + gl_SubgroupInvocationID;  // lane within the team
  const uint rows_per_wg = gl_NumSubgroups / KS * R;
  // The whole workgroup walks the same row groups (barriers below); a team past N loads the
  // last row again (valid memory) and never stores.
  for (uint g0 = gl_WorkGroupID.x * rows_per_wg; g0 < N; g0 += gl_NumWorkGroups.x * rows_per_wg) {
    const uint o0 = g0 + gl_SubgroupID / KS * R;
    float acc[4];
    [[unroll]] for (uint r = 0; r < R; ++r) acc[r] = 0.0;
    for (uint u0 = j; u0 < words; u0 += team * U) {
      uvec4 q[4][8];
      [[unroll]] for (uint r = 0; r < R; ++r) {
        const uint rb = min(o0 + r, N - 1u) * rw;
        [[unroll]] for (uint i = 0; i < U; ++i) {
          const uint u = u0 + i * team;
          q[r][i] = u < words ? wb4[s].w[rb + u] : uvec4(0);
        }
      }
      [[unroll]] for (uint i = 0; i < U; ++i) {
        const uint u = u0 + i * team;
        if (u < words) {
          [[unroll]] for (uint r = 0; r < R; ++r) acc[r] += dot_word(q[r][i], x4, u);
        }
      }
    }
    [[unroll]] for (uint r = 0; r < R; ++r) acc[r] = subgroupAdd(acc[r]);
    if (KS > 1) {
      barrier();  // the previous row group's readers are done
      if (gl_SubgroupInvocationID == 0) {
        [[unroll]] for (uint r = 0; r < R; ++r) team_sums[gl_SubgroupID][r] = acc[r];
      }
      barrier();
      [[unroll]] for (uint r = 0; r < R; ++r) {
        acc[r] = 0.0;
        for (uint k = 0; k < KS; ++k) acc[r] += team_sums[gl_SubgroupID - part + k][r];
      }
    }
    // Lane r of the team's first subgroup stores row o0 + r.
    [[unroll]] for (uint r = 0; r < R; ++r) {
      if (part == 0 && gl_SubgroupInvocationID == r && o0 + r < N) {
        const uint yo = pc.y_off[s] + o0 + r;
        act[yo] = epilogue(s, yo, acc[r]);
      }
    }
  }
}
