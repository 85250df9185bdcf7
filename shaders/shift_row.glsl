// The front of both mixes for one token: xn = LayerNorm(x[t]); prev = the previous token's xn
// (recomputed here from x[t-1]) or, at a sequence's first position, the shift row of its state
// slot; out_i = xn + (prev - xn) * lerp_i for n_lerp lerps (6 for time mix, 1 for channel mix).
// xn is saved so that a later dispatch can store the last token's into the state: this one
// cannot, other workgroups of the same sequence still read the old row. That later dispatch
// is the next shift (or out_ln), which commits the previous shift's save ("commit" fields).
// Run by shift.comp (a workgroup per token and slice of channels) and by a decode product's
// last workgroup (tail.glsl: every token, every channel, no dispatch or barrier of its own).
// The includer defines SHIFT_X(i) and SHIFT_X4(i), how x is read (a product's tail reads what
// the other workgroups of its dispatch wrote, so it reads past their caches).
#include "q8.glsl"

struct ShiftParams {
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
};
const uint kShiftParamWords = 22;

shared float s_out[6 * kMaxWg];  // a slice's outputs, for their int8 form

// What channel c of token t needs besides x: norm weight and bias, the shift row (the sequence's
// first position), the value to commit, the lerps.
struct Channel {
  float nw, nb, prev, commit, lerp[6];
};

Channel load_channel(ShiftParams a, uint c, uint t, uint sb, bool first, bool do_commit) {
  Channel p;
  p.nw = vecs[a.norm_w + c];
  p.nb = vecs[a.norm_b + c];
  p.prev = first ? state[sb + a.state_row + c] : 0.0;
  p.commit = do_commit ? act[a.commit_src + t * a.D + c] : 0.0;
  [[unroll]] for (uint i = 0; i < 6; ++i) {
    p.lerp[i] = i < a.n_lerp ? vecs[a.lerp_off + i * a.D + c] : 0.0;
  }
  return p;
}

// Token t's outputs for the slices of WG channels slice, slice + slices, ..: every workgroup
// computes the token's LayerNorm statistics over the whole row (cheap: the row is a few KB, read
// from cache). Every invocation of the workgroup must call it (barriers).
void shift_token(ShiftParams a, uint t, uint slice, uint slices) {
  const uint tid = gl_LocalInvocationID.x;
  const uint D = a.D, seq = meta[4 * t + 1], pos = meta[4 * t + 2];
  const uint slot = meta[a.meta_seq + 4 * seq], n = meta[a.meta_seq + 4 * seq + 2];
  const bool first = pos == 0;
  const uint xo = a.x_off + t * D, po = xo - D;  // po is only read when !first
  const uint sb = slot * a.slot_floats;
  const bool do_commit = a.commit != 0 && pos + 1 == n;
  // The parameters of this invocation's first channel, loaded before the statistics so that
  // their memory latency overlaps the reductions' (at one decoded token the kernel is a chain
  // of such latencies; the loop below reloads them only for devices with fewer slices).
  const uint c_first = slice * WG + tid;
  Channel p;
  if (c_first < D) p = load_channel(a, c_first, t, sb, first, do_commit);
  vec4 s = vec4(0);
  for (uint c = tid; c < D / 4u; c += WG) {
    s.x += dot(SHIFT_X4(xo / 4u + c), vec4(1));
    if (!first) s.y += dot(SHIFT_X4(po / 4u + c), vec4(1));
  }
  s = wg_sum4(s) / float(D);
  const float mu = s.x, mup = s.y;
  vec4 q = vec4(0);
  for (uint c = tid; c < D / 4u; c += WG) {
    const vec4 d = SHIFT_X4(xo / 4u + c) - mu;
    q.x += dot(d, d);
    if (!first) {
      const vec4 e = SHIFT_X4(po / 4u + c) - mup;
      q.y += dot(e, e);
    }
  }
  q = wg_sum4(q) / float(D);
  const float rs = inversesqrt(q.x + a.eps), rsp = inversesqrt(q.y + a.eps);
  // Slices of WG channels (D and WG are multiples of 16, so a slice holds whole runs of q8.glsl).
  for (uint c0 = slice * WG; c0 < D; c0 += slices * WG) {
    const uint c = c0 + tid;
    if (c < D) {
      if (c != c_first) p = load_channel(a, c, t, sb, first, do_commit);
      const float xn = (SHIFT_X(xo + c) - mu) * rs * p.nw + p.nb;
      const float prev = first ? p.prev : (SHIFT_X(po + c) - mup) * rsp * p.nw + p.nb;
      const float dx = prev - xn;
      [[unroll]] for (uint i = 0; i < 6; ++i) {
        if (i >= a.n_lerp) break;
        const float v = xn + dx * p.lerp[i];
        act[a.out_off + i * a.out_stride + t * D + c] = v;
        s_out[i * WG + tid] = v;
      }
      act[a.save_off + t * D + c] = xn;
      if (do_commit) state[sb + a.commit_row + c] = p.commit;
    }
    if (a.q8_mask != 0u || a.h16_mask != 0u) {
      barrier();  // the slice's outputs are in s_out
      // Their fp16 form: invocation tid packs pair tid % (WG / 2) of output tid / (WG / 2), ..
      // (the same halves as h16.comp, which then need not run for these outputs).
      for (uint j = tid; j < a.n_lerp * (WG / 2u); j += WG) {
        const uint i = j / (WG / 2u), e = 2u * (j % (WG / 2u));
        if ((a.h16_mask & (1u << i)) == 0u || c0 + e >= D) continue;
        const vec2 v = vec2(s_out[i * WG + e], s_out[i * WG + e + 1u]);
        actu[a.h16_off + i * a.h16_stride + t * (D / 2u) + (c0 + e) / 2u] = half_pair(v);
      }
      // Invocation tid writes quad tid % (WG / 4) of output tid / (WG / 4), and so on.
      const uint quads = WG / 4u, qr = q8_row_floats(D);
      for (uint j = tid; j < a.n_lerp * quads; j += WG) {
        const uint i = j / quads, e = 4u * (j % quads), r0 = i * WG + (e & ~15u);
        if ((a.q8_mask & (1u << i)) == 0u || c0 + e >= D) continue;
        vec4 run[4];
        [[unroll]] for (uint k = 0; k < 4; ++k) {
          run[k] = vec4(s_out[r0 + 4 * k], s_out[r0 + 4 * k + 1], s_out[r0 + 4 * k + 2],
                        s_out[r0 + 4 * k + 3]);
        }
        q8_store_quad(a.q8_off + i * a.q8_stride + t * qr, D, c0 + (e & ~15u), run, (e / 4u) & 3u);
      }
      barrier();  // before the next slice overwrites s_out
    }
  }
}
