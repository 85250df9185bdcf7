#version 450
// After the last layer: embd[i] = LayerNorm(x[out row i]; output_norm) for the rows that need
// an output, and commit the last layer's pending channel-mix shift (see shift.comp) for every
// sequence. Grid: max(n_out, B) workgroups. A row's quads stay in registers from one load to the
// store, as in shift.comp (one decoded token is a chain of latencies here). The _sg variant
// also writes the rows' int8 form (q8.glsl) where pc.q8_off says: what the head reads on the
// int8 kernel, which otherwise takes a q8.comp dispatch and its barrier.
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#include "common.glsl"
#include "q8.glsl"

layout(local_size_x_id = 0) in;
// Quads (4 channels) of a row a lane holds: D / 4 / WG rounded up (Kernels::row_quads()).
layout(constant_id = 1) const uint kRowQuads = 3;

layout(push_constant) uniform PC {
  uint D;
  uint x_off;     // act: x [T][D]
  uint embd_off;  // act: embd [n_out][D]
  uint norm_w;
  uint norm_b;
  uint n_out;
  uint n_seq;
  uint meta_seq;
  uint meta_out;
  uint slot_floats;
  uint commit_src;  // act: saved xf [T][D]
  uint commit_row;
  float eps;
  uint q8_off;  // act: embd's int8 form [n_out] rows, ~0u none (the _sg variant only)
}
pc;

// The outputs and the parameters as 16-byte words (offsets and D are multiples of 4 floats:
// Kernels::out_ln checks).
layout(set = 0, binding = 1) writeonly buffer OutLn4 { vec4 out4[]; };
layout(set = 0, binding = 2) readonly buffer Vecs4 { vec4 vecs4[]; };

void main() {
  const uint i = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint D = pc.D, nq = D / 4u;
  if (i < pc.n_seq) {
    const uint slot = meta[pc.meta_seq + 4 * i], last = meta[pc.meta_seq + 4 * i + 1] +
                                                         meta[pc.meta_seq + 4 * i + 2] - 1;
    for (uint c = tid; c < D; c += WG) {
      state[slot * pc.slot_floats + pc.commit_row + c] = act[pc.commit_src + last * D + c];
    }
  }
  if (i >= pc.n_out) return;  // uniform per workgroup
  const uint xo = pc.x_off + meta[pc.meta_out + i] * D, eo = pc.embd_off + i * D;
  vec4 xv[kRowQuads];
  vec4 s = vec4(0);
  [[unroll]] for (uint k = 0; k < kRowQuads; ++k) {
    const uint q = tid + k * WG;
    xv[k] = q < nq ? act4[xo / 4u + q] : vec4(0);
    s.x += dot(xv[k], vec4(1));
  }
  const float mu = wg_sum4(s).x / float(D);
  vec4 v2 = vec4(0);
  [[unroll]] for (uint k = 0; k < kRowQuads; ++k) {
    if (tid + k * WG < nq) {
      const vec4 d = xv[k] - mu;
      v2.x += dot(d, d);
    }
  }
  const float rs = inversesqrt(wg_sum4(v2).x / float(D) + pc.eps);
  [[unroll]] for (uint k = 0; k < kRowQuads; ++k) {
    const uint q = tid + k * WG, c = 4u * q;
    const bool live = q < nq;
    vec4 e = vec4(0);
    if (live) {
      e = (xv[k] - mu) * rs * vecs4[(pc.norm_w + c) / 4u] + vecs4[(pc.norm_b + c) / 4u];
      out4[(eo + c) / 4u] = e;
    }
#ifdef USE_SUBGROUP
    if (pc.q8_off != ~0u) {
      q8_store_sg(pc.q8_off + i * q8_row_floats(D), D, c & ~15u, e, q & 3u, live);
    }
#endif
  }
}
