#version 450
// Decode products of K-quant weights (Q4_K, Q5_K, Q6_K) against inputs in their int8 form (q8.glsl),
// for devices with integer dot products: y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for a few
// tokens, x_off naming each input's q8 rows. Same grid, pieces and reduction as mv.comp, but a
// lane multiplies the nibbles of a piece with the inputs' bytes four at a time (OpSDot) and
// applies the weight's and the input's scales once per 16-element run:
//   sum_run W x = (d_w * sc) * d_x * sum(q_w * q_x) - (dmin * m) * sum(x).
// mv.comp spends ~110 instructions unpacking each 32-weight piece to floats and reads 4 bytes of
// input per weight; here the piece costs ~30 and the input 1.25 bytes.
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef LN_PROLOGUE
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#include "common.glsl"
#include "quant.glsl"
#include "piece.glsl"
#include "q8.glsl"
#include "q8_dot.glsl"

#ifndef PIECE_AFFINE
#error "mvq.comp reads K-quant weights only"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TT = 1;  // tokens per workgroup, <= 8
layout(constant_id = 2) const uint R = 2;   // rows per subgroup, <= 4
layout(constant_id = 3) const uint U = 2;   // pieces a lane loads at once
// QOUT: also write y's int8 form where pc.yq_off says (the ffn key product, whose output feeds
// the ffn value product): the workgroup's rows (a multiple of 16, at most 64) make whole runs.
// It saves a dispatch and a barrier per layer (q8.comp).
layout(constant_id = 4) const bool QOUT = false;
shared float s_q[QOUT ? TT * 64u : 1u];  // the workgroup's outputs [token][row]
// Split K (pc.ksplit subgroups share a row group, the host keeps subgroups x R x TT <= 256):
// subgroup j of a group takes the pieces of every ksplit-th step, and the group's first
// subgroup adds the parts in order (the same order for any T: the split depends on the shape).
// A long row otherwise leaves few subgroups each waiting out many steps' loads (K = 10240).
shared float s_ks[256];

#include "product.glsl"

// A step's weight loads, U pieces a lane of the subgroup's R rows, into Raw raw[U][4]. A macro,
// for the product and its diagnostic builds alike: as a function the product's SPIR-V would keep
// a call, which NVIDIA compiles slower (docs/VULKAN.md).
#define MVQ_LOAD_STEP(raw)                                                 \
  Raw raw[U][4];                                                           \
  [[unroll]] for (uint u = 0; u < U; ++u) {                                \
    const uint p = min(p0 + u * gl_SubgroupSize, np - 1u);                 \
    [[unroll]] for (uint r = 0; r < R; ++r) {                              \
      raw[u][r] = load_piece(s, min(o0 + r, N - 1u) * pc.row_bytes[s], p); \
    }                                                                      \
  }

#ifdef MVQ_DIAG
#include "mvq_diag.glsl"
#endif

#ifdef LN_PROLOGUE
// A product of one decoded token with its shift in front (mvq_ln_*, a pipeline of its own;
// shift_front.glsl): each workgroup makes the shift's int8 form of its input into shared memory
// and reads its inputs there, instead of a shift dispatch writing them before a barrier.
layout(constant_id = 5) const uint LNL = 256;  // shift.comp's workgroup (Kernels::row_wg_)
layout(constant_id = 6) const uint LNQ = 3;    // quads a lane of those holds (row_quads())
layout(constant_id = 7) const uint KMAX = 2560;
shared uvec4 s_xq[KMAX / 16u];  // the int8 form: a run of 16 values a word
shared vec2 s_xd[KMAX / 16u];   // a run's (d, sum)

// Quad q of the input (v), into the int8 form: q8_store_sg's numbers, into shared memory (the
// four lanes of a run are neighbours). Every invocation calls it.
void front_store(uint q, vec4 v, bool live) {
  float amax, sum;
  q8_run(v, amax, sum);
  if (live) {
    s_xq[q / 4u][q % 4u] = q8_word(v, amax);
    if (q % 4u == 0u) s_xd[q / 4u] = vec2(amax / 127.0, sum);
  }
}
#include "shift_front.glsl"
#endif

void main() {
  const uint s = gl_WorkGroupID.z;
  const uint K = pc.K[s], N = pc.N[s], t0 = gl_WorkGroupID.y * TT;
  const uint nt = min(TT, pc.T - t0), lane = gl_SubgroupInvocationID;
  const uint ks = pc.ksplit, rg = gl_SubgroupID / ks, part = gl_SubgroupID % ks;
  const uint np = K / 32u, rows_per_wg = gl_NumSubgroups / ks * R, q_row = q8_row_floats(K);
#ifdef LN_PROLOGUE
  shift_front(K, pc.x_off[s]);  // (x_off: the slot's lerp, a vecs offset)
#endif
  for (uint g0 = gl_WorkGroupID.x * rows_per_wg; g0 < N; g0 += gl_NumWorkGroups.x * rows_per_wg) {
    const uint o0 = g0 + rg * R;
    float acc[4 * 8];
    [[unroll]] for (uint i = 0; i < R * TT; ++i) acc[i] = 0.0;
    // U pieces a lane per step, all loads issued before any sum: the weights stream from
    // memory, and a long row (K = 10240: ten pieces a lane) would otherwise wait out ten memory
    // latencies in a row.
    for (uint p0 = part * U * gl_SubgroupSize + lane; p0 < np; p0 += ks * U * gl_SubgroupSize) {
      // Rows past N load the last row again, pieces past the row its last piece (valid memory);
      // their sums are never stored or are skipped.
#if defined(MVQ_DIAG) && MVQ_DIAG != 5
      diag_step(s, p0, lane, o0, N, np, K, q_row, t0, acc);  // (mvq_diag.glsl)
#else
      MVQ_LOAD_STEP(raw);
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint p = p0 + u * gl_SubgroupSize;
        if (p >= np) break;
        uvec4 lo[4], hi[4];
        vec4 aff[4];
        [[unroll]] for (uint r = 0; r < R; ++r) piece_bytes(raw[u][r], p, lo[r], hi[r], aff[r]);
#if defined(WTYPE_Q4_K) && MVQ_DIAG == 5
        // e: no scale decoding (the header's bits as the affine map; wrong sums, same loads).
        [[unroll]] for (uint r = 0; r < R; ++r) {
          aff[r] = uintBitsToFloat((raw[u][r].hd & 0x007fffffu) | 0x3f800000u);
        }
#endif
        const uint ea = run_a(p), eb = run_b(p);
        [[unroll]] for (uint t = 0; t < TT; ++t) {
          if (t < nt) {
#ifdef LN_PROLOGUE
            const uvec4 xa = s_xq[ea / 16u], xb = s_xq[eb / 16u];
            const vec2 da = s_xd[ea / 16u], db = s_xd[eb / 16u];
#else
            const uint qo = pc.x_off[s] + (t0 + t) * q_row, so = qo + K / 4u;
            const uvec4 xa = actu4[(qo + ea / 4u) / 4u], xb = actu4[(qo + eb / 4u) / 4u];
            const vec2 da = act2[(so + ea / 8u) / 2u], db = act2[(so + eb / 8u) / 2u];
#endif
            [[unroll]] for (uint r = 0; r < R; ++r) {
              const float ia = float(dot16(lo[r], xa)), ib = float(dot16(hi[r], xb));
              acc[r * TT + t] += ia * (aff[r].x * da.x) + da.y * aff[r].y +
                                 ib * (aff[r].z * db.x) + db.y * aff[r].w;
            }
          }
        }
      }
#endif
    }
    [[unroll]] for (uint i = 0; i < R * TT; ++i) acc[i] = subgroupAdd(acc[i]);
    if (ks > 1u) {
      if (lane == 0u) {
        [[unroll]] for (uint i = 0; i < R * TT; ++i) s_ks[gl_SubgroupID * R * TT + i] = acc[i];
      }
      barrier();
      if (part == 0u) {
        [[unroll]] for (uint i = 0; i < R * TT; ++i) {
          acc[i] = s_ks[gl_SubgroupID * R * TT + i];
          for (uint j = 1u; j < ks; ++j) acc[i] += s_ks[(gl_SubgroupID + j) * R * TT + i];
        }
      }
      barrier();  // before the next rows overwrite s_ks
    }
    // Lane i stores (row i / TT, token i % TT); R * TT <= 32 <= any subgroup size we accept.
    [[unroll]] for (uint i = 0; i < R * TT; ++i) {
      const uint r = i / TT, t = i % TT;
      if (part == 0u && lane == i % gl_SubgroupSize && o0 + r < N && t < nt) {
        const uint yo = pc.y_off[s] + (t0 + t) * N + o0 + r;
        const float y = epilogue(s, yo, acc[i]);
        act[yo] = y;
        if (QOUT) s_q[t * rows_per_wg + rg * R + r] = y;
      }
    }
    if (QOUT && pc.yq_off[s] != ~0u) {
      barrier();  // the workgroup's outputs are in s_q
      const uint quads = rows_per_wg / 4u, qr = q8_row_floats(N);
      for (uint j = gl_LocalInvocationID.x; j < nt * quads; j += WG) {
        const uint t = j / quads, e = 4u * (j % quads), r0 = t * rows_per_wg + (e & ~15u);
        if (g0 + e >= N) continue;  // N is a multiple of 16: whole runs only
        vec4 run[4];
        [[unroll]] for (uint k = 0; k < 4; ++k) {
          run[k] = vec4(s_q[r0 + 4 * k], s_q[r0 + 4 * k + 1], s_q[r0 + 4 * k + 2], s_q[r0 + 4 * k + 3]);
        }
        q8_store_quad(pc.yq_off[s] + (t0 + t) * qr, N, g0 + (e & ~15u), run, (e / 4u) & 3u);
      }
      barrier();  // before the next rows overwrite s_q
    }
  }
}
