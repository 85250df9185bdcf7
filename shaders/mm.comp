#version 450
// Matrix products y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for up to four weights of one
// type in one dispatch (gl_WorkGroupID.z picks the weight: r/k/v, the four LoRA halves).
// A workgroup owns one output row at a time and TT tokens; each invocation decodes 8-element
// pieces of the row once and applies them to all TT tokens, so weights are read once per TT
// tokens. Decoding (T = number of sequences) is then a matvec with a workgroup reduction.
#include "common.glsl"
#include "quant.glsl"
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 8;  // tokens per workgroup, <= 8

layout(push_constant) uniform PC {
  uvec4 K;          // inputs (ne[0])
  uvec4 N;          // outputs (ne[1])
  uvec4 x_off;      // act offset of x [T][K]
  uvec4 y_off;      // act offset of y [T][N]
  uvec4 mode;       // 0 store, 1 add (residual), 2 tanh, 3 sigmoid, 4 relu^2
  uvec4 row_bytes;  // bytes per weight row
  uint T;
}
pc;

shared float red[8 * kMaxWg];

void main() {
  const uint s = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
  const uint K = pc.K[s], N = pc.N[s], t0 = gl_WorkGroupID.y * TT;
  const uint P = K / 8u;
  const uint nt = min(TT, pc.T - t0);
  for (uint o = gl_WorkGroupID.x; o < N; o += gl_NumWorkGroups.x) {
    float acc[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    const uint rb = o * pc.row_bytes[s];
    for (uint p = tid; p < P; p += WG) {
      float v[8];
      decode8(s, rb, p, v);
      const vec4 w0 = vec4(v[0], v[1], v[2], v[3]), w1 = vec4(v[4], v[5], v[6], v[7]);
      [[unroll]] for (uint t = 0; t < TT; ++t) {
        if (t < nt) {
          const uint xo = pc.x_off[s] + (t0 + t) * K + p * 8u;
          acc[t] += dot(w0, vec4(act[xo], act[xo + 1], act[xo + 2], act[xo + 3])) +
                    dot(w1, vec4(act[xo + 4], act[xo + 5], act[xo + 6], act[xo + 7]));
        }
      }
    }
#ifdef USE_SUBGROUP
    // Sum within each subgroup, then across subgroups through shared memory.
    [[unroll]] for (uint t = 0; t < TT; ++t) acc[t] = subgroupAdd(acc[t]);
    if (gl_SubgroupInvocationID == 0) {
      [[unroll]] for (uint t = 0; t < TT; ++t) red[t * kMaxWg + gl_SubgroupID] = acc[t];
    }
    barrier();
    if (tid < nt) {
      float sum = 0.0;
      for (uint g = 0; g < gl_NumSubgroups; ++g) sum += red[tid * kMaxWg + g];
      acc[0] = sum;
    }
#else
    [[unroll]] for (uint t = 0; t < TT; ++t) red[t * kMaxWg + tid] = acc[t];
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
      if (tid < h) {
        [[unroll]] for (uint t = 0; t < TT; ++t) red[t * kMaxWg + tid] += red[t * kMaxWg + tid + h];
      }
      barrier();
    }
    if (tid < nt) acc[0] = red[tid * kMaxWg];
#endif
    if (tid < nt) {
      const uint yo = pc.y_off[s] + (t0 + tid) * N + o;
      float y = acc[0];
      switch (pc.mode[s]) {
        case 1: y += act[yo]; break;
        case 2: y = tanh(y); break;
        case 3: y = sigmoid(y); break;
        case 4: y = max(y, 0.0); y *= y; break;
        default: break;
      }
      act[yo] = y;
    }
    barrier();  // red is reused by the next row
  }
}
