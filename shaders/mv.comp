#version 450
// Decode products y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for a few tokens (T <= TT per
// workgroup row of the grid), up to four weights of one type per dispatch (gl_WorkGroupID.z).
// Bandwidth bound, so each weight byte is loaded once, 16 bytes at a time (piece.glsl): a
// subgroup owns R rows, its lanes take one 32-weight piece each of a KC-element chunk of K.
// With several tokens (TT > 1) the chunk's inputs are staged in shared memory first: read
// straight from the activations, every row re-reads them through L2, and at 8 tokens that, not
// the weights, bounded the product (H100: F16 2560 -> 10240 134 -> 73 us, Q4_K 81 -> 66 us); at
// one token the staging's barriers cost more than they save. A lane issues its pieces' loads
// before the staging, then decodes each piece into registers and streams the tokens' x through
// it. Subgroup adds reduce. Each token's sums run in the same order for any T (forwards of up to
// 16 tokens agree with one token's to rounding). Same push constants and epilogues as mm.comp.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "quant.glsl"
#include "piece.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 1;     // tokens per workgroup, <= 8
layout(constant_id = 2) const uint R = 2;      // rows per subgroup, <= 4
layout(constant_id = 3) const uint KC = 1024;  // chunk: 32 x the subgroup size (a piece a lane)

const bool kStage = TT > 1;
const uint KCP = KC + KC / 8u;  // a token's chunk in shared memory, padded (xs_slot)
shared vec4 xs[kStage ? TT * KCP / 4u : 1u];

#include "product.glsl"

// Piece p of rows o0 .. o0 + R - 1 (clamped to N - 1) as loaded.
void load_rows(uint s, uint o0, uint N, uint p, out Raw raw[4]) {
  [[unroll]] for (uint r = 0; r < R; ++r) {
    raw[r] = load_piece(s, min(o0 + r, N - 1u) * pc.row_bytes[s], p);
  }
}

void main() {
  const uint s = gl_WorkGroupID.z;
  const uint K = pc.K[s], N = pc.N[s], t0 = gl_WorkGroupID.y * TT;
  const uint nt = min(TT, pc.T - t0), lane = gl_SubgroupInvocationID;
  const uint np = K / 32u, rows_per_wg = gl_NumSubgroups * R;
  // The whole workgroup walks the same rows and chunks (barriers); a subgroup past N computes
  // clamped rows that it never stores.
  for (uint g0 = gl_WorkGroupID.x * rows_per_wg; g0 < N; g0 += gl_NumWorkGroups.x * rows_per_wg) {
    const uint o0 = g0 + gl_SubgroupID * R;
    float acc[4 * 8];
    [[unroll]] for (uint i = 0; i < R * TT; ++i) acc[i] = 0.0;
    for (uint c0 = 0; c0 < K; c0 += KC) {
      const uint p_first = c0 / 32u + lane, p_end = min(np, (c0 + KC) / 32u);
      // Rows past N load the last row again (valid memory); their sums are never stored. (Loading
      // the next chunk's pieces here instead, ahead of time, cost 10% at one token on the H100.)
      Raw raw[4];
      load_rows(s, o0, N, min(p_first, np - 1u), raw);
      if (kStage) {
        barrier();  // the previous chunk's readers are done
        for (uint i = gl_LocalInvocationID.x; i < TT * KC / 4u; i += WG) {
          const uint t = i / (KC / 4u), e = (i % (KC / 4u)) * 4u;
          vec4 v = vec4(0);
          if (t < nt && c0 + e < K) v = act4[(pc.x_off[s] + (t0 + t) * K + c0 + e) / 4u];
          xs[(t * KCP + xs_slot(e)) / 4u] = v;
        }
        barrier();
      }
      // One pass where the subgroup is as wide as KC assumes; more where it is narrower.
      for (uint p = p_first; p < p_end; p += gl_SubgroupSize) {
        if (p != p_first) {
          load_rows(s, o0, N, p, raw);
        }
        vec4 w[4][8];
        vec4 aff[4];
        [[unroll]] for (uint r = 0; r < R; ++r) unpack_piece(raw[r], p, w[r], aff[r]);
        [[unroll]] for (uint t = 0; t < TT; ++t) {
          if (t < nt) {
            vec4 xa[4], xb[4];
            if (kStage) {
              const uint ra = (t * KCP + xs_slot(run_a(p) - c0)) / 4u;
              const uint rb = (t * KCP + xs_slot(run_b(p) - c0)) / 4u;
              [[unroll]] for (uint k = 0; k < 4; ++k) {
                xa[k] = xs[ra + k];
                xb[k] = xs[rb + k];
              }
            } else {
              const uint xo = pc.x_off[s] + (t0 + t) * K;
              [[unroll]] for (uint k = 0; k < 4; ++k) {
                xa[k] = act4[(xo + run_a(p)) / 4u + k];
                xb[k] = act4[(xo + run_b(p)) / 4u + k];
              }
            }
#ifdef PIECE_AFFINE
            const vec4 one = vec4(1);
            const float sa = dot(xa[0] + xa[1] + xa[2] + xa[3], one);
            const float sb = dot(xb[0] + xb[1] + xb[2] + xb[3], one);
#endif
            [[unroll]] for (uint r = 0; r < R; ++r) {
              float da = 0.0, db = 0.0;
              [[unroll]] for (uint k = 0; k < 4; ++k) {
                da += dot(w[r][k], xa[k]);
                db += dot(w[r][4 + k], xb[k]);
              }
#ifdef PIECE_AFFINE
              acc[r * TT + t] += da * aff[r].x + sa * aff[r].y + db * aff[r].z + sb * aff[r].w;
#else
              acc[r * TT + t] += da + db;
#endif
            }
          }
        }
      }
    }
    [[unroll]] for (uint i = 0; i < R * TT; ++i) acc[i] = subgroupAdd(acc[i]);
    // Lane i stores (row i / TT, token i % TT); R * TT <= 32 <= any subgroup size we accept.
    [[unroll]] for (uint i = 0; i < R * TT; ++i) {
      const uint r = i / TT, t = i % TT;
      if (lane == i % gl_SubgroupSize && o0 + r < N && t < nt) {
        const uint yo = pc.y_off[s] + (t0 + t) * N + o0 + r;
        act[yo] = epilogue(s, yo, acc[i]);
      }
    }
  }
}
