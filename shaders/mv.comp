#version 450
// Decode products y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for a few tokens (T <= TT per
// workgroup row of the grid), up to four weights of one type per dispatch (gl_WorkGroupID.z).
// Bandwidth bound, so each weight byte is loaded once, 16 bytes at a time (piece.glsl): a
// subgroup owns R rows, its lanes stride over 32-weight pieces; a lane issues the loads of U
// pieces of all R rows at once (latency is what limits a short row), then decodes each piece
// into registers and streams the tokens' x through it. Subgroup adds reduce; no
// shared memory, no barriers. Same push constants and epilogues as mm.comp.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "quant.glsl"
#include "piece.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 1;  // tokens per workgroup, <= 8
layout(constant_id = 2) const uint R = 2;   // rows per subgroup, <= 4
layout(constant_id = 3) const uint U = 1;   // pieces per lane whose loads are issued together, <= 4

#include "product.glsl"

void main() {
  const uint s = gl_WorkGroupID.z;
  const uint K = pc.K[s], N = pc.N[s], t0 = gl_WorkGroupID.y * TT;
  const uint nt = min(TT, pc.T - t0), lane = gl_SubgroupInvocationID;
  const uint rows_per_pass = gl_NumWorkGroups.x * gl_NumSubgroups * R;
  for (uint o0 = (gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID) * R; o0 < N;
       o0 += rows_per_pass) {
    float acc[4 * 8];
    [[unroll]] for (uint i = 0; i < R * TT; ++i) acc[i] = 0.0;
    const uint np = K / 32u;
    for (uint p0 = lane; p0 < np; p0 += gl_SubgroupSize * U) {
      // All loads of U pieces of R rows first: the latency is paid once per U pieces.
      Raw raw[4][4];
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint p = min(p0 + u * gl_SubgroupSize, np - 1u);
        [[unroll]] for (uint r = 0; r < R; ++r) {
          // Rows past N load the last row again (valid memory); their sums are never stored.
          raw[u][r] = load_piece(s, min(o0 + r, N - 1u) * pc.row_bytes[s], p);
        }
      }
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint p = p0 + u * gl_SubgroupSize;
        if (p >= np) break;
        vec4 w[4][8];
        vec4 aff[4];
        [[unroll]] for (uint r = 0; r < R; ++r) unpack_piece(raw[u][r], p, w[r], aff[r]);
        const uint ra = run_a(p) / 4u, rb = run_b(p) / 4u;
        [[unroll]] for (uint t = 0; t < TT; ++t) {
          if (t < nt) {
            const uint xo = (pc.x_off[s] + (t0 + t) * K) / 4u;
            vec4 xa[4], xb[4];
            [[unroll]] for (uint k = 0; k < 4; ++k) {
              xa[k] = act4[xo + ra + k];
              xb[k] = act4[xo + rb + k];
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
