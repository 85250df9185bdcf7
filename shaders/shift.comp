#version 450
// The front of both mixes: xn = LayerNorm(x[t]); prev = the previous token's xn (recomputed
// here from x[t-1]) or, at a sequence's first position, the shift row of its state slot;
// out_i = xn + (prev - xn) * lerp_i for n_lerp lerps (6 for time mix, 1 for channel mix).
// xn is saved so that a later dispatch can store the last token's into the state: this one
// cannot, other workgroups of the same sequence still read the old row. That later dispatch
// is the next shift (or out_ln), which commits the previous shift's save ("commit" fields).
#include "common.glsl"
#include "q8.glsl"

layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
  uint D;
  uint n_lerp;
  uint x_off;       // act: x [T][D]
  uint out_off;     // act: out_i at out_off + i * out_stride, [T][D]
  uint out_stride;
  uint save_off;    // act: xn [T][D]
  uint norm_w;      // vecs
  uint norm_b;
  uint lerp_off;    // vecs: n_lerp rows of D
  uint state_row;   // float offset within a slot of the shift row read at position 0
  uint slot_floats;
  uint commit;      // 1: store commit_src[last token] into commit_row of the slot
  uint commit_src;
  uint commit_row;
  uint meta_seq;
  float eps;
  uint q8_mask;    // bit i: out_i's int8 form (q8.glsl) too, for a product that reads it
  uint q8_off;     // act: out_i's int8 form at q8_off + i * q8_stride, [T] rows
  uint q8_stride;
  uint h16_mask;   // bit i: out_i's fp16 form too (h16.comp's), for a tensor-core product
  uint h16_off;    // act: out_i's fp16 form at h16_off + i * h16_stride, [T][D / 2] words
  uint h16_stride;
}
pc;

shared float s_out[6 * kMaxWg];  // a slice's outputs, for their int8 form

// What channel c of token t needs besides x: norm weight and bias, the shift row (the sequence's
// first position), the value to commit, the lerps.
struct Channel {
  float nw, nb, prev, commit, lerp[6];
};

Channel load_channel(uint c, uint t, uint sb, bool first, bool do_commit) {
  Channel p;
  p.nw = vecs[pc.norm_w + c];
  p.nb = vecs[pc.norm_b + c];
  p.prev = first ? state[sb + pc.state_row + c] : 0.0;
  p.commit = do_commit ? act[pc.commit_src + t * pc.D + c] : 0.0;
  [[unroll]] for (uint i = 0; i < 6; ++i) {
    p.lerp[i] = i < pc.n_lerp ? vecs[pc.lerp_off + i * pc.D + c] : 0.0;
  }
  return p;
}

// Grid (T, slices): every workgroup computes its token's LayerNorm statistics over the whole row
// (cheap: the row is a few KB, read from cache) and then writes WG channels of the outputs, so
// a single decoded token still spreads over D / WG workgroups (the host picks the number of
// slices: one on CPU devices, where workgroups are expensive).
void main() {
  const uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint D = pc.D, seq = meta[4 * t + 1], pos = meta[4 * t + 2];
  const uint slot = meta[pc.meta_seq + 4 * seq], n = meta[pc.meta_seq + 4 * seq + 2];
  const bool first = pos == 0;
  const uint xo = pc.x_off + t * D, po = xo - D;  // po is only read when !first
  const uint sb = slot * pc.slot_floats;
  const bool do_commit = pc.commit != 0 && pos + 1 == n;
  // The parameters of this invocation's first channel, loaded before the statistics so that
  // their memory latency overlaps the reductions' (at one decoded token the kernel is a chain
  // of such latencies; the loop below reloads them only for devices with fewer slices).
  const uint c_first = gl_WorkGroupID.y * WG + tid;
  Channel p;
  if (c_first < D) p = load_channel(c_first, t, sb, first, do_commit);
  vec4 s = vec4(0);
  for (uint c = tid; c < D / 4u; c += WG) {
    s.x += dot(act4[xo / 4u + c], vec4(1));
    if (!first) s.y += dot(act4[po / 4u + c], vec4(1));
  }
  s = wg_sum4(s) / float(D);
  const float mu = s.x, mup = s.y;
  vec4 q = vec4(0);
  for (uint c = tid; c < D / 4u; c += WG) {
    const vec4 d = act4[xo / 4u + c] - mu;
    q.x += dot(d, d);
    if (!first) {
      const vec4 e = act4[po / 4u + c] - mup;
      q.y += dot(e, e);
    }
  }
  q = wg_sum4(q) / float(D);
  const float rs = inversesqrt(q.x + pc.eps), rsp = inversesqrt(q.y + pc.eps);
  // Slices of WG channels (D and WG are multiples of 16, so a slice holds whole runs of q8.glsl).
  for (uint c0 = gl_WorkGroupID.y * WG; c0 < D; c0 += gl_NumWorkGroups.y * WG) {
    const uint c = c0 + tid;
    if (c < D) {
      if (c != c_first) p = load_channel(c, t, sb, first, do_commit);
      const float xn = (act[xo + c] - mu) * rs * p.nw + p.nb;
      const float prev = first ? p.prev : (act[po + c] - mup) * rsp * p.nw + p.nb;
      const float dx = prev - xn;
      [[unroll]] for (uint i = 0; i < 6; ++i) {
        if (i >= pc.n_lerp) break;
        const float v = xn + dx * p.lerp[i];
        act[pc.out_off + i * pc.out_stride + t * D + c] = v;
        s_out[i * WG + tid] = v;
      }
      act[pc.save_off + t * D + c] = xn;
      if (do_commit) state[sb + pc.commit_row + c] = p.commit;
    }
    if (pc.q8_mask != 0u || pc.h16_mask != 0u) {
      barrier();  // the slice's outputs are in s_out
      // Their fp16 form: invocation tid packs pair tid % (WG / 2) of output tid / (WG / 2), ..
      // (the same halves as h16.comp, which then need not run for these outputs).
      for (uint j = tid; j < pc.n_lerp * (WG / 2u); j += WG) {
        const uint i = j / (WG / 2u), e = 2u * (j % (WG / 2u));
        if ((pc.h16_mask & (1u << i)) == 0u || c0 + e >= D) continue;
        const vec2 v = vec2(s_out[i * WG + e], s_out[i * WG + e + 1u]);
        actu[pc.h16_off + i * pc.h16_stride + t * (D / 2u) + (c0 + e) / 2u] = half_pair(v);
      }
      // Invocation tid writes quad tid % (WG / 4) of output tid / (WG / 4), and so on.
      const uint quads = WG / 4u, qr = q8_row_floats(D);
      for (uint j = tid; j < pc.n_lerp * quads; j += WG) {
        const uint i = j / quads, e = 4u * (j % quads), r0 = i * WG + (e & ~15u);
        if ((pc.q8_mask & (1u << i)) == 0u || c0 + e >= D) continue;
        vec4 run[4];
        [[unroll]] for (uint k = 0; k < 4; ++k) {
          run[k] = vec4(s_out[r0 + 4 * k], s_out[r0 + 4 * k + 1], s_out[r0 + 4 * k + 2],
                        s_out[r0 + 4 * k + 3]);
        }
        q8_store_quad(pc.q8_off + i * pc.q8_stride + t * qr, D, c0 + (e & ~15u), run, (e / 4u) & 3u);
      }
      barrier();  // before the next slice overwrites s_out
    }
  }
}
