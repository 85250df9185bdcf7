#version 450
// Decode products of K-quant weights (Q4_K, Q5_K) against inputs in their int8 form (q8.glsl),
// for devices with integer dot products: y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for a few
// tokens, x_off naming each input's q8 rows. Same grid, pieces and reduction as mv.comp, but a
// lane multiplies the nibbles of a piece with the inputs' bytes four at a time (OpSDot) and
// applies the weight's and the input's scales once per 16-element run:
//   sum_run W x = (d_w * sc) * d_x * sum(q_w * q_x) - (dmin * m) * sum(x).
// mv.comp spends ~110 instructions unpacking each 32-weight piece to floats and reads 4 bytes of
// input per weight; here the piece costs ~30 and the input 1.25 bytes.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "quant.glsl"
#include "piece.glsl"
#include "q8.glsl"

#ifndef PIECE_AFFINE
#error "mvq.comp reads K-quant weights only"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 1;  // tokens per workgroup, <= 8
layout(constant_id = 2) const uint R = 2;   // rows per subgroup, <= 4

#include "product.glsl"

void main() {
  const uint s = gl_WorkGroupID.z;
  const uint K = pc.K[s], N = pc.N[s], t0 = gl_WorkGroupID.y * TT;
  const uint nt = min(TT, pc.T - t0), lane = gl_SubgroupInvocationID;
  const uint np = K / 32u, rows_per_wg = gl_NumSubgroups * R, q_row = q8_row_floats(K);
  for (uint g0 = gl_WorkGroupID.x * rows_per_wg; g0 < N; g0 += gl_NumWorkGroups.x * rows_per_wg) {
    const uint o0 = g0 + gl_SubgroupID * R;
    float acc[4 * 8];
    [[unroll]] for (uint i = 0; i < R * TT; ++i) acc[i] = 0.0;
    for (uint p = lane; p < np; p += gl_SubgroupSize) {
      // Rows past N load the last row again (valid memory); their sums are never stored.
      Raw raw[4];
      [[unroll]] for (uint r = 0; r < R; ++r) {
        raw[r] = load_piece(s, min(o0 + r, N - 1u) * pc.row_bytes[s], p);
      }
      uvec4 lo[4], hi[4];
      vec4 aff[4];
      [[unroll]] for (uint r = 0; r < R; ++r) piece_bytes(raw[r], p, lo[r], hi[r], aff[r]);
      const uint ea = run_a(p), eb = run_b(p);
      [[unroll]] for (uint t = 0; t < TT; ++t) {
        if (t < nt) {
          const uint qo = pc.x_off[s] + (t0 + t) * q_row, so = qo + K / 4u;
          const uvec4 xa = actu4[(qo + ea / 4u) / 4u], xb = actu4[(qo + eb / 4u) / 4u];
          const vec2 da = vec2(act[so + ea / 8u], act[so + ea / 8u + 1u]);
          const vec2 db = vec2(act[so + eb / 8u], act[so + eb / 8u + 1u]);
          [[unroll]] for (uint r = 0; r < R; ++r) {
            const float ia = float(dot16(lo[r], xa)), ib = float(dot16(hi[r], xb));
            acc[r * TT + t] += ia * (aff[r].x * da.x) + da.y * aff[r].y + ib * (aff[r].z * db.x) +
                               db.y * aff[r].w;
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
