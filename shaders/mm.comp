#version 450
// Matrix products y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for up to four weights of one
// type in one dispatch (gl_WorkGroupID.z picks the weight: r/k/v, the four LoRA halves).
// A subgroup (or, without subgroup arithmetic, the workgroup) owns one output row at a time
// and TT tokens; each invocation decodes 8-element pieces of the row once and applies them to
// all TT tokens, so weights are read once per TT tokens. Decoding (T = number of sequences)
// is then a matvec.
#include "common.glsl"
#include "quant.glsl"
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#else
shared float red[8 * kMaxWg];
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 8;  // tokens per workgroup, <= 8

#include "product.glsl"

// Accumulates row rb's dot products with nt tokens over the pieces p0, p0+step, ...
void row_dots(uint s, uint rb, uint K, uint t0, uint nt, uint p0, uint step, inout float acc[8]) {
  for (uint p = p0; p < K / 8u; p += step) {
    float v[8];
    decode8(s, rb, p, v);
    const vec4 w0 = vec4(v[0], v[1], v[2], v[3]), w1 = vec4(v[4], v[5], v[6], v[7]);
    [[unroll]] for (uint t = 0; t < TT; ++t) {
      if (t < nt) {
        const uint xo = (pc.x_off[s] + (t0 + t) * K) / 4u + p * 2u;
        acc[t] += dot(w0, act4[xo]) + dot(w1, act4[xo + 1u]);
      }
    }
  }
}

void main() {
  const uint s = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
  const uint K = pc.K[s], N = pc.N[s], t0 = gl_WorkGroupID.y * TT;
  const uint nt = min(TT, pc.T - t0);
#ifdef USE_SUBGROUP
  // One subgroup per output row: lanes split the row, subgroupAdd reduces, no barriers.
  const uint nsg = gl_NumSubgroups, lane = gl_SubgroupInvocationID;
  for (uint o = gl_WorkGroupID.x * nsg + gl_SubgroupID; o < N; o += gl_NumWorkGroups.x * nsg) {
    float acc[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    row_dots(s, o * pc.row_bytes[s], K, t0, nt, lane, gl_SubgroupSize, acc);
    [[unroll]] for (uint t = 0; t < TT; ++t) acc[t] = subgroupAdd(acc[t]);
    if (lane < nt) {
      const uint yo = pc.y_off[s] + (t0 + lane) * N + o;
      act[yo] = epilogue(s, yo, acc[lane]);
    }
  }
#else
  // One workgroup per output row, reduced through shared memory.
  for (uint o = gl_WorkGroupID.x; o < N; o += gl_NumWorkGroups.x) {
    float acc[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    row_dots(s, o * pc.row_bytes[s], K, t0, nt, tid, WG, acc);
    [[unroll]] for (uint t = 0; t < TT; ++t) red[t * kMaxWg + tid] = acc[t];
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
      if (tid < h) {
        [[unroll]] for (uint t = 0; t < TT; ++t) red[t * kMaxWg + tid] += red[t * kMaxWg + tid + h];
      }
      barrier();
    }
    if (tid < nt) {
      const uint yo = pc.y_off[s] + (t0 + tid) * N + o;
      act[yo] = epilogue(s, yo, red[tid * kMaxWg]);
    }
    barrier();  // red is reused by the next row
  }
#endif
}
