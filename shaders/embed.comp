#version 450
// x[t] = LayerNorm(token_embd[token t]) for every token: one workgroup per token decodes the
// embedding row from its GGUF blocks (weight binding 0) and normalises it with ln0.
#include "common.glsl"
#include "quant.glsl"

layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
  uint D;
  uint row_bytes;
  uint x_off;   // act: x [T][D]
  uint norm_w;  // vecs
  uint norm_b;
  float eps;
}
pc;

void main() {
  const uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint rb = meta[4 * t] * pc.row_bytes, xo = pc.x_off + t * pc.D;
  float sum = 0.0;
  for (uint p = tid; p < pc.D / 8u; p += WG) {
    float v[8];
    decode8(0, rb, p, v);
    [[unroll]] for (uint k = 0; k < 8; ++k) {
      act[xo + p * 8u + k] = v[k];
      sum += v[k];
    }
  }
  // Each invocation re-reads only what it wrote, so no barrier is needed before the stats.
  const float mu = wg_sum4(vec4(sum, 0, 0, 0)).x / float(pc.D);
  float sq = 0.0;
  for (uint p = tid; p < pc.D / 8u; p += WG) {
    [[unroll]] for (uint k = 0; k < 8; ++k) {
      const float d = act[xo + p * 8u + k] - mu;
      sq += d * d;
    }
  }
  const float rs = inversesqrt(wg_sum4(vec4(sq, 0, 0, 0)).x / float(pc.D) + pc.eps);
  for (uint p = tid; p < pc.D / 8u; p += WG) {
    [[unroll]] for (uint k = 0; k < 8; ++k) {
      const uint c = p * 8u + k;
      act[xo + c] = (act[xo + c] - mu) * rs * vecs[pc.norm_w + c] + vecs[pc.norm_b + c];
    }
  }
}
