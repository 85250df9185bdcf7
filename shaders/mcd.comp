#version 450
// Decode products on tensor cores (VK_NV_cooperative_matrix): y[t][o] = epilogue(sum_i W[o][i] *
// x[t][i]) for up to 16 tokens of quantised weights, reading the inputs' fp16 form (h16.comp).
//
// Why: the int8 decode product (mvq.comp) pays for every weight once per token, so 8 tokens
// cost ~2.5x one token there; here each weight is decoded once and the tensor cores multiply it
// with all tokens for nearly nothing, leaving the weight stream itself.
//
// A workgroup owns 16 output rows and 16 tokens; its S subgroups (local size 32 S) each walk
// their own contiguous 1 / S of K, so they need no workgroup barrier until the end and a short
// product still makes many subgroups (2560 outputs: 160 workgroups). Per 64-input step a lane
// decodes one 32-weight piece (row lane % 16, piece lane / 16) into the subgroup's fp16 weight
// tile and stages 4 of the 128 uvec4 of the tokens' inputs; the subgroup then multiplies 4 pairs
// of 16 x 16 matrices. Each lane keeps U steps of loads in flight (its ring of registers), so a
// subgroup waits out one memory latency per U steps. At the end the S partial tiles are added
// in subgroup order (deterministic) and go through the epilogue.
//
// Split-K (pc.ksplit > 1, gl_WorkGroupID.z = slot * ksplit + part), for long rows with few
// outputs (the ffn value product: 10240 inputs, 160 workgroups of 2560 outputs, each subgroup
// 20 steps in a row): ksplit workgroups share a tile, each over a contiguous 1 / ksplit of K, and
// write their partial sums where mc.comp's go (part_row()); mc_sum.comp adds them in order and
// applies the epilogue. The split depends on the shape alone (Kernels::mcd_split).
//
// Tokens past T stage zeros; rows past N decode the last row (valid memory, never stored).
// A token's sums run in the same order whatever T is: its row of the tiles meets only its own
// inputs. Precision: tensor_core.glsl's; with MC_SPLIT (F16 weights) the inputs are read as
// floats and go in as two fp16 halves into two accumulators, as in mc.comp (float32's precision).
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "quant.glsl"
#define PIECE_UNIFORM_CHUNK  // (piece.glsl: every lane of a subgroup decodes the same chunk)
#include "piece.glsl"

layout(local_size_x_id = 0) in;  // S subgroups of 32, S <= kMaxSubgroups
// Steps a lane has in flight. H100, 8 tokens, Q4_K 2560 -> 10240 / 10240 -> 2560 / 2560 ->
// 2560: 2 steps 21.8 / 33.2 / 10.6 us, 4 steps 29.3 / 40.2 / 12.8 (164 registers against
// 121: fewer warps fit), 8 steps 33.6 / 45.9 / 14.6.
const uint U = 2;
const uint BM = 16, BT = 16, BK = 64;
#ifdef MC_SPLIT
const uint kHalves = 2u;  // input tiles: hi, then lo
const uint kMaxSubgroups = 4;  // (8 subgroups' three tiles would pass 48 KB)
#else
const uint kHalves = 1u;
const uint kMaxSubgroups = 8;
#endif
const uint kStride = BK / 8u + 1u;                 // uvec4 per staged row: 8 of fp16, 1 of padding
const uint kSlab = (BM + kHalves * BT) * kStride;  // a subgroup's weight and input tiles
const uint kXLoads = BT * (BK / 8u) / 32u;  // input uvec4 a lane stages per step (4)
// [subgroup][row][k] weights (B, column-major K x 16), then [subgroup][token][k] inputs (A,
// row-major 16 x K); after the loop [subgroup][token][row] fp32 partial sums.
shared uvec4 smem[kMaxSubgroups * kSlab];

#include "product.glsl"
#include "tensor_core.glsl"

// One staged input uvec4 (8 inputs) as loaded: their fp16 form, or (MC_SPLIT) the floats.
#ifdef MC_SPLIT
struct XIn {
  vec4 a, b;
};
XIn load_x(uint xo_half, bool live) {  // xo_half: the uvec4 index in the fp16 form's layout
  if (!live) return XIn(vec4(0), vec4(0));
  return XIn(act4[2u * xo_half], act4[2u * xo_half + 1u]);
}
#else
struct XIn {
  uvec4 h;
};
XIn load_x(uint xo_half, bool live) { return XIn(live ? actu4[xo_half] : uvec4(0)); }
#endif

// The subgroup's execution and its shared-memory writes: all the tiles need. (subgroupBarrier()
// with subgroupMemoryBarrierShared() also orders buffer memory; on the H100 it timed the same.)
void subgroup_tiles_barrier() {
  controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                 gl_SemanticsAcquireRelease);
}

void main() {
  const uint s = gl_WorkGroupID.z / pc.ksplit, part = gl_WorkGroupID.z % pc.ksplit;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint K = pc.K[s], N = pc.N[s];
  const uint m0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BT;
  if (m0 >= N) return;  // a shorter weight of the group: uniform per workgroup
  const uint nt = min(BT, pc.T - t0), S = gl_NumSubgroups;
  // This subgroup's steps of K: its 1 / S of the workgroup's part (the host makes K / BK a
  // multiple of ksplit).
  const uint nk = K / BK / pc.ksplit, kq = nk * part;
  const uint q0 = kq + nk * sg / S, q1 = kq + nk * (sg + 1u) / S;
  const uint wr = lane % BM, wp = lane / BM;
  const uint w_row = min(m0 + wr, N - 1u) * pc.row_bytes[s];
  const uint kW = sg * kSlab, kX = kW + BM * kStride;
  // Input uvec4 j = lane + 32 i of a step: token j / 8, columns 8 (j % 8) ...; i < kXLoads.
  const uint xt0 = lane / 8u, xc = lane % 8u;
  // uvec4 index of token t0's step 0, column xc, in the fp16 form's layout (floats: twice it
  // in vec4; x_off counts floats there, halves' words here).
  const uint x_row = (MC_SPLIT_ON ? pc.x_off[s] / 8u : pc.x_off[s] / 4u) + xc;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#ifdef MC_SPLIT
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc_lo = acc;
#endif
  Raw raw[U];
  XIn xu[U][kXLoads];
  [[unroll]] for (uint u = 0; u < U; ++u) {
    const uint q = q0 + u;
    if (q < q1) {
      raw[u] = load_piece(s, w_row, 2u * q + wp);
      [[unroll]] for (uint i = 0; i < kXLoads; ++i) {
        const uint t = xt0 + 4u * i;
        xu[u][i] = load_x(x_row + (t0 + t) * (K / 8u) + 8u * q, t < nt);
      }
    }
  }
  for (uint q = q0; q < q1; ++q) {
    stage_piece(raw[0], 2u * q + wp, q, kW + wr * kStride);
    [[unroll]] for (uint i = 0; i < kXLoads; ++i) {
      const uint at = kX + (xt0 + 4u * i) * kStride + xc;
#ifdef MC_SPLIT
      const vec4 a = xu[0][i].a * kInScale, b = xu[0][i].b * kInScale;
      const vec4 ha = split_hi(a), hb = split_hi(b);
      smem[at] = pack8(ha, hb);
      smem[at + BT * kStride] = pack8((a - ha) * kLoScale, (b - hb) * kLoScale);
#else
      smem[at] = xu[0][i].h;
#endif
    }
    // The ring moves down one slot and its top gets step q + U, which loads while the tensor
    // cores work on step q. (Moves, not a rotating index: indexed by a loop variable, even an
    // unrolled one, the NVIDIA compiler (550) put the ring in local memory, 2-3x slower.)
    [[unroll]] for (uint u = 0; u + 1u < U; ++u) {
      raw[u] = raw[u + 1u];
      xu[u] = xu[u + 1u];
    }
    if (q + U < q1) {
      raw[U - 1u] = load_piece(s, w_row, 2u * (q + U) + wp);
      [[unroll]] for (uint i = 0; i < kXLoads; ++i) {
        const uint t = xt0 + 4u * i;
        xu[U - 1u][i] = load_x(x_row + (t0 + t) * (K / 8u) + 8u * (q + U), t < nt);
      }
    }
    subgroup_tiles_barrier();
    [[unroll]] for (uint kk = 0; kk < BK / 16u; ++kk) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a, b;
      coopMatLoadNV(a, smem, kX + 2u * kk, kStride, false);
      coopMatLoadNV(b, smem, kW + 2u * kk, kStride, true);
      acc = coopMatMulAddNV(a, b, acc);
#ifdef MC_SPLIT
      coopMatLoadNV(a, smem, kX + BT * kStride + 2u * kk, kStride, false);
      acc_lo = coopMatMulAddNV(a, b, acc_lo);
#endif
    }
    subgroup_tiles_barrier();  // the tiles are read before the next step overwrites them
  }
  barrier();  // every subgroup is done with its tiles
#ifdef MC_SPLIT
  acc = acc + acc_lo * (1.0 / kLoScale);
#endif
  coopMatStoreNV(acc, smem, sg * (BT * BM / 4u), BM / 4u, false);
  barrier();
  // The S partial tiles added in subgroup order, then the epilogue; two neighbouring outputs an
  // invocation, so that it can also write their fp16 form (one word, h16.comp's bits) where
  // pc.yq_off asks: the ffn key product's output, which the ffn value product reads so.
  const bool half_out = pc.yq_off[s] != ~0u;  // (the host asks only where N is even)
  for (uint e = gl_LocalInvocationID.x; e < BT * BM / 2u; e += WG) {
    const uint tt = e / (BM / 2u), r = 2u * (e % (BM / 2u)), o = m0 + r;
    if (tt >= nt || o >= N) continue;
    vec2 y = vec2(0.0);
    for (uint k = 0; k < S; ++k) {
      const uint c = k * BT * BM + tt * BM + r;  // even: both floats in one uvec4
      y += uintBitsToFloat(uvec2(smem[c / 4u][c % 4u], smem[c / 4u][c % 4u + 1u]));
    }
    if (pc.ksplit > 1u) {  // partial sums, for mc_sum.comp
      const uint po = part_row(s, part) + (t0 + tt) * pc.part_width + o;
      act[po] = y.x / kInScale;
      if (o + 1u < N) act[po + 1u] = y.y / kInScale;
      continue;
    }
    const uint yo = pc.y_off[s] + (t0 + tt) * N + o;
    y = vec2(epilogue(s, yo, y.x / kInScale), epilogue(s, yo + 1u, y.y / kInScale));
    act[yo] = y.x;
    if (o + 1u < N) act[yo + 1u] = y.y;
    if (half_out) actu[pc.yq_off[s] + (t0 + tt) * (N / 2u) + o / 2u] = half_pair(y);
  }
}
