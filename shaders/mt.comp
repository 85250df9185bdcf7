#version 450
// Prefill products y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for many tokens: a workgroup owns
// a tile of BM = 64 output rows by BN = 64 tokens and walks K one 32-weight piece (piece.glsl)
// at a time. Per step, 64 invocations decode one piece of each row into shared memory (so each
// weight byte is read once per 64 tokens), all 256 stage the matching 32 inputs of the 64
// tokens, and each invocation accumulates a 4 x 4 block of the tile in registers.
// Same push constants and epilogues as mm.comp; gl_WorkGroupID.z picks the weight.
#include "common.glsl"
#include "quant.glsl"
#include "piece.glsl"

layout(local_size_x = 256) in;
const uint BM = 64, BN = 64, BK = 32;

#include "product.glsl"

// [k][row / 4] and [k][token / 4]: an invocation reads its 4 rows / 4 tokens as one vec4.
shared vec4 w_tile[BK][BM / 4];
shared vec4 x_tile[BK][BN / 4];

void main() {
  const uint s = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
  const uint K = pc.K[s], N = pc.N[s], T = pc.T;
  const uint m0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
  if (m0 >= N) return;  // a shorter weight of the group: uniform per workgroup
  // Compute layout: rows 4 * tr.., tokens 4 * tc..
  const uint tr = tid % 16u, tc = tid / 16u;
  // Staging layout of x: token xt, 8 of the piece's 32 inputs (quarter xq).
  const uint xt = tid / 4u, xq = tid % 4u;
  const bool x_live = t0 + xt < T;
  const uint x_row = (pc.x_off[s] + min(t0 + xt, T - 1u) * K) / 4u;
  const uint w_row = min(m0 + tid, N - 1u) * pc.row_bytes[s];  // tid < BM decodes this row
  vec4 acc[4];
  [[unroll]] for (uint i = 0; i < 4; ++i) acc[i] = vec4(0);

  for (uint p = 0; p < K / BK; ++p) {
    if (tid < BM) {
      vec4 w[8];
      vec4 aff;
      piece(s, w_row, p, w, aff);
      [[unroll]] for (uint k = 0; k < 8; ++k) {
#ifdef PIECE_AFFINE
        const vec4 v = k < 4 ? w[k] * aff.x + aff.y : w[k] * aff.z + aff.w;
#else
        const vec4 v = w[k];
#endif
        [[unroll]] for (uint e = 0; e < 4; ++e) w_tile[4 * k + e][tid / 4u][tid % 4u] = v[e];
      }
    }
    {
      // Inputs 8 * xq .. 8 * xq + 7 of the piece: run A for xq < 2, run B after.
      const uint run = (xq < 2u ? run_a(p) : run_b(p)) / 4u + (xq & 1u) * 2u;
      const vec4 a = x_live ? act4[x_row + run] : vec4(0);
      const vec4 b = x_live ? act4[x_row + run + 1u] : vec4(0);
      [[unroll]] for (uint e = 0; e < 4; ++e) {
        x_tile[8u * xq + e][xt / 4u][xt % 4u] = a[e];
        x_tile[8u * xq + 4u + e][xt / 4u][xt % 4u] = b[e];
      }
    }
    barrier();
    [[unroll]] for (uint k = 0; k < BK; ++k) {
      const vec4 a = w_tile[k][tr], b = x_tile[k][tc];
      [[unroll]] for (uint i = 0; i < 4; ++i) acc[i] += a * b[i];  // acc[token][row]
    }
    barrier();
  }
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    const uint t = t0 + 4u * tc + i;
    if (t >= T) break;
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      const uint o = m0 + 4u * tr + j;
      if (o < N) {
        const uint yo = pc.y_off[s] + t * N + o;
        act[yo] = epilogue(s, yo, acc[i][j]);
      }
    }
  }
}
