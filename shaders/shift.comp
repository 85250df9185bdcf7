#version 450
// The front of both mixes for one token: xn = LayerNorm(x[t]); prev = the previous token's xn
// (recomputed here from x[t-1]) or, at a sequence's first position, the shift row of its state
// slot; out_i = xn + (prev - xn) * lerp_i for n_lerp lerps (6 for time mix, 1 for channel mix).
// xn is saved so that a later dispatch can store the last token's into the state: this one
// cannot, other workgroups of the same sequence still read the old row. That later dispatch
// is the next shift (or out_ln), which commits the previous shift's save ("commit" fields).
// Grid (T, slices): a single decoded token still spreads over D / 4 / WG workgroups, a quad of
// channels a lane (the host picks the number of slices: one on CPU devices, where workgroups are
// expensive).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
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
  uint f32_skip;   // bit i: no float form of out_i (every product reads another form)
}
pc;

// The outputs as 16-byte words (their regions and rows start at multiples of 4 floats).
layout(set = 0, binding = 1) writeonly buffer ShiftOut4 { vec4 shift_out4[]; };

// Quads (4 channels) of a row a lane holds: D / 4 / WG rounded up (Kernels::shift_quads()).
layout(constant_id = 1) const uint kShiftQuads = 3;

// What quad q (channels 4q .. 4q + 3) of token t needs besides x: norm weight and bias, the shift
// row (the sequence's first position), the values to commit, the lerps.
struct Quad {
  vec4 nw, nb, prev, commit, lerp[6];
};

// The parameters and the state as 16-byte words: every offset the shift reads them at is a
// multiple of 4 floats (Kernels::shift checks), so a quad is one load instead of four (at one
// token the kernel issues ~10 of them a lane before its first reduction).
layout(set = 0, binding = 2) readonly buffer Vecs4 { vec4 vecs4[]; };
layout(set = 0, binding = 3) buffer State4 { vec4 state4[]; };

Quad load_quad(uint q, uint t, uint sb, bool first, bool do_commit) {
  const uint c = 4u * q;
  Quad p;
  p.nw = vecs4[(pc.norm_w + c) / 4u];
  p.nb = vecs4[(pc.norm_b + c) / 4u];
  p.prev = first ? state4[(sb + pc.state_row + c) / 4u] : vec4(0);
  p.commit = do_commit ? act4[(pc.commit_src + t * pc.D + c) / 4u] : vec4(0);
  [[unroll]] for (uint i = 0; i < 6; ++i) {
    p.lerp[i] = i < pc.n_lerp ? vecs4[(pc.lerp_off + i * pc.D + c) / 4u] : vec4(0);
  }
  return p;
}


// Token t (workgroup x), quads q = tid + k * WG for k = slice, slice + slices, .. (workgroup y of
// the slices): every workgroup computes the token's LayerNorm statistics over the whole row (a
// few KB, held in registers: x is read once), this lane's first output quad's parameters loaded
// before them so that the memory latencies overlap (at one decoded token this is a chain of such
// latencies).
// The loop over output quads stays rolled: the kernel runs once per token and layer, and an
// unrolled one (90-120 KB of code on the H200) spent more time fetching its instructions than
// computing.
void main() {
  const uint t = gl_WorkGroupID.x, slice = gl_WorkGroupID.y, slices = gl_NumWorkGroups.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint D = pc.D, nq = D / 4u, seq = meta[4 * t + 1], pos = meta[4 * t + 2];
  const uint slot = meta[pc.meta_seq + 4 * seq], n = meta[pc.meta_seq + 4 * seq + 2];
  const bool first = pos == 0;
  const uint xo = pc.x_off + t * D, po = xo - D;  // po is only read when !first
  const uint sb = slot * pc.slot_floats;
  const bool do_commit = pc.commit != 0 && pos + 1 == n;
  vec4 xv[kShiftQuads], pv[kShiftQuads];
  [[unroll]] for (uint k = 0; k < kShiftQuads; ++k) {
    const uint q = tid + k * WG;
    xv[k] = q < nq ? act4[xo / 4u + q] : vec4(0);
    pv[k] = q < nq && !first ? act4[po / 4u + q] : vec4(0);
  }
  const uint q_first = tid + slice * WG;
  Quad p;
  if (q_first < nq) p = load_quad(q_first, t, sb, first, do_commit);
  vec4 s = vec4(0);
  [[unroll]] for (uint k = 0; k < kShiftQuads; ++k) {
    s.x += dot(xv[k], vec4(1));  // zero past the row
    if (!first) s.y += dot(pv[k], vec4(1));
  }
  s = wg_sum4(s) / float(D);
  const float mu = s.x, mup = s.y;
  vec4 v2 = vec4(0);
  [[unroll]] for (uint k = 0; k < kShiftQuads; ++k) {
    if (tid + k * WG < nq) {
      const vec4 d = xv[k] - mu;
      v2.x += dot(d, d);
      if (!first) {
        const vec4 e = pv[k] - mup;
        v2.y += dot(e, e);
      }
    }
  }
  v2 = wg_sum4(v2) / float(D);
  const float rs = inversesqrt(v2.x + pc.eps), rsp = inversesqrt(v2.y + pc.eps);
  const uint qr = q8_row_floats(D);
  [[dont_unroll]] for (uint k = slice; k < kShiftQuads && k * WG < nq; k += slices) {
    const uint q = tid + k * WG, c = 4u * q;
    const bool live = q < nq;
    if (live && k != slice) p = load_quad(q, t, sb, first, do_commit);
    vec4 x = xv[0], px = pv[0];  // element k, by selects (an indexed array would go to memory)
    [[unroll]] for (uint j = 1; j < kShiftQuads; ++j) {
      if (k == j) {
        x = xv[j];
        px = pv[j];
      }
    }
    const vec4 xn = (x - mu) * rs * p.nw + p.nb;
    const vec4 prev = first ? p.prev : (px - mup) * rsp * p.nw + p.nb;
    const vec4 dx = prev - xn;
    [[unroll]] for (uint i = 0; i < 6; ++i) {
      if (i >= pc.n_lerp) break;
      const vec4 v = xn + dx * p.lerp[i];
      if (live && (pc.f32_skip & (1u << i)) == 0u) {
        shift_out4[(pc.out_off + i * pc.out_stride + t * D + c) / 4u] = v;
      }
#ifdef USE_SUBGROUP
      // Their fp16 form (h16.comp's halves, which then need not run for these outputs) and
      // int8 form.
      if (live && (pc.h16_mask & (1u << i)) != 0u) {
        const uint h = pc.h16_off + i * pc.h16_stride + t * (D / 2u) + c / 2u;
        actu[h] = half_pair(v.xy);
        actu[h + 1u] = half_pair(v.zw);
      }
      if ((pc.q8_mask & (1u << i)) != 0u) {
        q8_store_sg(pc.q8_off + i * pc.q8_stride + t * qr, D, c & ~15u, v, q & 3u, live);
      }
#endif
    }
    if (live) {
      shift_out4[(pc.save_off + t * D + c) / 4u] = xn;
      if (do_commit) {
        state4[(sb + pc.commit_row + c) / 4u] = p.commit;
      }
    }
  }
}

