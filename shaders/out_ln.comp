#version 450
// After the last layer: embd[i] = LayerNorm(x[out row i]; output_norm) for the rows that need
// an output, and commit the last layer's pending channel-mix shift (see shift.comp) for every
// sequence. Grid: max(n_out, B) workgroups.
#include "common.glsl"

layout(local_size_x_id = 0) in;
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
}
pc;

void main() {
  const uint i = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint D = pc.D;
  if (i < pc.n_seq) {
    const uint slot = meta[pc.meta_seq + 4 * i], last = meta[pc.meta_seq + 4 * i + 1] +
                                                         meta[pc.meta_seq + 4 * i + 2] - 1;
    for (uint c = tid; c < D; c += WG) {
      state[slot * pc.slot_floats + pc.commit_row + c] = act[pc.commit_src + last * D + c];
    }
  }
  if (i >= pc.n_out) return;  // uniform per workgroup
  const uint xo = pc.x_off + meta[pc.meta_out + i] * D, eo = pc.embd_off + i * D;
  float s = 0.0;
  for (uint c = tid; c < D; c += WG) s += act[xo + c];
  const float mu = wg_sum4(vec4(s, 0, 0, 0)).x / float(D);
  float q = 0.0;
  for (uint c = tid; c < D; c += WG) q += (act[xo + c] - mu) * (act[xo + c] - mu);
  const float rs = inversesqrt(wg_sum4(vec4(q, 0, 0, 0)).x / float(D) + pc.eps);
  for (uint c = tid; c < D; c += WG) {
    act[eo + c] = (act[xo + c] - mu) * rs * vecs[pc.norm_w + c] + vecs[pc.norm_b + c];
  }
}
