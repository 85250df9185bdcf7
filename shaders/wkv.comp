#version 450
// The RWKV-7 recurrence for one (head, sequence) per workgroup, sequential over the sequence's
// tokens of this chunk, with everything per token that needs the head's channels together:
// decay w, in-context rate a, value residual, kk normalisation, k update, state update, read
// out with r, GroupNorm (one group per head), bonus and gate. Invocation i owns value row i of
// the head's N x N state S[i][*], kept in registers for the whole chunk.
#include "common.glsl"

layout(local_size_x_id = 0) in;   // == NS
layout(constant_id = 1) const uint NS = 64;  // head size

#include "wkv_push.glsl"

shared float sw[NS], skk[NS], ska[NS], sk[NS], sr[NS];

void main() {
  const uint h = gl_WorkGroupID.x, seq = gl_WorkGroupID.y, i = gl_LocalInvocationID.x;
  const uint D = pc.D, ch = h * NS + i;
  const uint slot = meta[pc.meta_seq + 4 * seq], first = meta[pc.meta_seq + 4 * seq + 1],
             n = meta[pc.meta_seq + 4 * seq + 2];
  const uint sb = slot * pc.slot_floats + pc.state_base;
  // State row 1+j holds S_h[i][j] at column h*N+i.
  float S[NS];
  [[unroll]] for (uint j = 0; j < NS; ++j) S[j] = state[sb + (1 + j) * D + ch];
  const float w0 = vecs[pc.w0 + ch], a0 = vecs[pc.a0 + ch], v0 = vecs[pc.v0 + ch];
  const float kkw = vecs[pc.k_k + ch], kaw = vecs[pc.k_a + ch], rkw = vecs[pc.r_k + ch];
  const float lnw = vecs[pc.lnx_w + ch], lnb = vecs[pc.lnx_b + ch];
  for (uint tt = 0; tt < n; ++tt) {
    const uint o = (first + tt) * D + ch;
    const float r = act[pc.r_off + o], k = act[pc.k_off + o];
    float v = act[pc.v_off + o];
    const float w = exp(-0.606531 * sigmoid(w0 + act[pc.wl_off + o]));
    const float a = sigmoid(a0 + act[pc.al_off + o]);
    if ((pc.flags & kLayer0) != 0u) {
      act[pc.vf_off + o] = v;
    } else {
      v += (act[pc.vf_off + o] - v) * sigmoid(v0 + act[pc.vl_off + o]);
    }
    const float kr = k * kkw;
    const float k2 = k * (1.0 + (a - 1.0) * kaw);
    const vec4 s1 = wg_sum4(vec4(kr * kr, r * k2 * rkw, 0, 0));  // also fences sw.. reuse
    const float kk = kr / max(sqrt(s1.x), 1e-12);
    sw[i] = w;
    skk[i] = kk;
    ska[i] = kk * a;
    sk[i] = k2;
    sr[i] = r;
    barrier();
    float sa = 0.0;
    [[unroll]] for (uint j = 0; j < NS; ++j) sa -= S[j] * skk[j];
    float y = 0.0;
    [[unroll]] for (uint j = 0; j < NS; ++j) {
      S[j] = S[j] * sw[j] + sa * ska[j] + v * sk[j];
      y += S[j] * sr[j];
    }
    const float mu = wg_sum4(vec4(y, 0, 0, 0)).x / float(NS);
    const float var = wg_sum4(vec4((y - mu) * (y - mu), 0, 0, 0)).x / float(NS);
    const float yn = (y - mu) * inversesqrt(var + 64e-5) * lnw + lnb;
    act[pc.y_off + o] = (yn + v * s1.y) * act[pc.g_off + o];
  }
  [[unroll]] for (uint j = 0; j < NS; ++j) state[sb + (1 + j) * D + ch] = S[j];
}
