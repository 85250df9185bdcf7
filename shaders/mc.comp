#version 450
// Prefill products on tensor cores (VK_NV_cooperative_matrix): y[t][o] = epilogue(sum_i W[o][i] *
// x[t][i]) for many tokens: quantised weights, and the F32 LoRA weights of quantised models
// (MmSlot::half_ok). A workgroup of 2 x BM / 32 subgroups of 32 owns a tile of BN = 64 (or,
// compiled with -DMC_TOKENS=32, 32) tokens by BM = 64 (or, -DMC_ROWS=128, 128) output rows and
// walks K 64 inputs (two 32-weight pieces of piece.glsl) per step: each invocation decodes one
// piece into shared memory as fp16, the workgroup stages the tokens' inputs as fp16, and each
// subgroup multiplies a BN / 2 x 32 part of the tile with 16 x 16 x 16 fp16 matrices
// accumulating in fp32. The tile goes through shared memory once more for the epilogue (the
// fragments' element order is opaque). The 32-token tile doubles the workgroups of a product
// with few output rows, which otherwise leaves SMs idle; the 128-row tile halves how often the
// tokens' inputs are read per product (every row tile reads all of them).
//
// Precision: tensor_core.glsl's (operands rounded to fp16, inputs scaled by 2^-8).
//
// pc.yq_off (unsplit products): the epilogue also writes y's fp16 form there (h16.comp's bits,
// for the next product), and with kModeHalfOnly only that form (the ffn key product's output,
// 10240 floats a token that the ffn value product reads as fp16 alone).
//
// MC_SPLIT (F16 weights, which fp16 holds exactly): each input goes in as two fp16 halves, hi (x
// with its mantissa cut to fp16's) and lo = fp16((x - hi) * 2^10), multiplied with the same
// weights into two sets of fp32 accumulators, y = acc_hi + acc_lo * 2^-10: ~21 bits of each
// input instead of fp16's 11, so F16 models keep float32's precision (their fixtures' bound) on
// tensor cores (tensor_core.glsl: split_hi).
//
// X16 (specialization constant 1): x_off names the inputs' fp16 form, already scaled (h16.comp),
// rather than their floats: half the bytes, and the tile loader stores them as they come. Every
// row tile reads all the tokens' inputs, so in float32 they were most of the product's traffic. Float models keep the fp32 kernels (mt.comp), whose
// results the F32 fixtures check at 1e-5.
#ifdef MC_KHR
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "quant.glsl"
#include "piece.glsl"

#ifndef MC_TOKENS
#define MC_TOKENS 64
#endif
#ifndef MC_ROWS
#define MC_ROWS 64
#endif
layout(local_size_x = 2 * MC_ROWS) in;  // two invocations a row decode its step's two pieces
const uint BM = MC_ROWS, BN = MC_TOKENS, BK = 64;
const uint NI = 2u * BM;        // invocations
const uint RQ = BM / 32u;       // subgroups along the rows (32 rows each); 2 along the tokens
const uint FT = BN / 32u;       // 16-token fragments per subgroup
const uint XP = NI / BN;        // invocations staging one token's step inputs
const uint XV = BK / XP / 4u;   // vec4 of inputs each of them stages (2 .. 8)
const uint XU = XV / 2u;        // the same inputs' fp16 form: uvec4 of 8 halves (1 .. 4)
layout(constant_id = 1) const bool X16 = false;
#ifdef MC_KHR
// MC_KHR (VK_KHR_cooperative_matrix, any vendor): fragments of FM tokens x FN rows x FK inputs
// and subgroups of SG, the device's (specialization constants 2-5); each subgroup takes FPS of the
// tile's fragments, (BN / FM) x (BM / FN) in row-major order, loading its own operands for each.
#ifdef MC_SPLIT
#error "MC_KHR takes no split inputs"
#endif
layout(constant_id = 2) const uint FM = 16;
layout(constant_id = 3) const uint FN = 16;
layout(constant_id = 4) const uint FK = 16;
layout(constant_id = 5) const uint SG = 32;
const uint kFragCols = BM / FN;                      // fragments along the rows
const uint FPS = (BN / FM) * kFragCols / (NI / SG);  // fragments a subgroup
#endif
// Tiles in shared memory as uvec4 (8 halves): a row of BK halves is 8 uvec4, padded to 9 so
// that the 16 rows one fragment load reads fall in different banks. The fp32 result tile for
// the epilogue reuses the same memory once the last step is done (with 128 rows the three
// would not fit in 48 KB).
//
// Split-K (pc.ksplit > 1, gl_WorkGroupID.z = slot * ksplit + part): a product with few row tiles
// (2560 outputs: 40) leaves the GPU with ~2 workgroups an SM, too few to hide the step loop's
// latencies; ksplit workgroups then share each tile, each over a contiguous 1 / ksplit of K,
// and write their fp32 sums for mc_sum.comp to add in a fixed order (deterministic).
// Float weights (F32 LoRA up products of quantised models: rank 96 in 2.9B, 32 in small models)
// may hold an odd number of 32-input pieces: the last step's second piece and its inputs are then
// staged as zeros. Quantised rows come in whole steps, and their loops keep no such test.
#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
const bool kOddPieces = true;
#else
const bool kOddPieces = false;
#endif
#ifdef MC_SPLIT
const uint kHalves = 2u;  // the inputs' tiles: hi, then lo
#else
const uint kHalves = 1u;
#endif
const uint kStride = BK / 8 + 1;
const uint kCStride = BM + 4;  // floats per token row of the fp32 result tile
const uint kW = 0, kX = BM * kStride, kXLo = kX + BN * kStride;
const uint kTiles = (BM + kHalves * BN) * kStride, kC = BN * kCStride / 4u;
#include "product.glsl"

// [row][k] at kW: B as a column-major K x BM matrix; [token][k] at kX: A, row-major BN x K;
// after the loop [token][row] fp32 (kCStride floats a token).
shared uvec4 smem[kTiles > kC ? kTiles : kC];

#include "tensor_core.glsl"

// The piece to load for piece p: itself, or where p is past the row (kOddPieces), the row's last
// (its values are not staged; the load stays inside the row).
uint live_piece(uint p, uint pieces) { return kOddPieces ? min(p, pieces - 1u) : p; }

// Whether the step-q input at offset i of the step (a multiple of 4) is inside the row of K.
bool in_row(uint q, uint i, uint K) { return !kOddPieces || BK * q + i < K; }

void main() {
  const uint s = gl_WorkGroupID.z / pc.ksplit, part = gl_WorkGroupID.z % pc.ksplit;
  const uint tid = gl_LocalInvocationID.x;
  const uint K = pc.K[s], N = pc.N[s], T = pc.T;
  const uint m0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
  if (m0 >= N) return;  // a shorter weight of the group: uniform per workgroup
  // Decode duty: row wr of the tile, piece 2q + wp of step q. A subgroup's lanes l and l + 16
  // take the two pieces of one row (for Q4_K 32 contiguous bytes of nibbles and one header), so
  // each load instruction touches 16 rows rather than 32 (H100, 512 tokens: Q6_K 2560 -> 10240
  // 343 -> 318 us, 10240 -> 2560 395 -> 336; Q4_K unchanged).
  const uint wr = (tid / 32u) * 16u + tid % 16u, wp = (tid % 32u) / 16u;
  const uint w_row = min(m0 + wr, N - 1u) * pc.row_bytes[s];
  // Staging duty: token xt of the tile, inputs 4 XV xh .. 4 XV (xh + 1) - 1 of the step.
  const uint xt = tid / XP, xh = tid % XP;
  const bool x_live = t0 + xt < T;
  const uint x_tok = min(t0 + xt, T - 1u);
  const uint x_row = X16 ? (pc.x_off[s] + x_tok * (K / 2u)) / 4u + XU * xh
                         : (pc.x_off[s] + x_tok * K) / 4u + XV * xh;
#ifdef MC_KHR
  coopmat<float, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator> acc[FPS];
  [[unroll]] for (uint f = 0; f < FPS; ++f) {
    acc[f] = coopmat<float, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator>(0.0);
  }
#else
  // This subgroup's part: tokens BN / 2 qt.., rows 32 qr..
  const uint sg = gl_SubgroupID, qt = sg / RQ, qr = sg % RQ;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FT][2];
#ifdef MC_SPLIT
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc_lo[FT][2];
#endif
  [[unroll]] for (uint i = 0; i < FT; ++i) {
    [[unroll]] for (uint j = 0; j < 2; ++j) {
      acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#ifdef MC_SPLIT
      acc_lo[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#endif
    }
  }
#endif

  // Registers carry step q + 1's weight piece and inputs while step q multiplies, so the
  // loads' latency hides behind the matrix work.
  // This workgroup's steps of K: [q0, nq) (the host splits only K a multiple of BK, into steps
  // a multiple of ksplit).
  const uint steps = (K + BK - 1u) / BK, pieces = K / 32u;
  const uint q0 = steps / pc.ksplit * part, nq = q0 + steps / pc.ksplit;
  Raw raw = load_piece(s, w_row, live_piece(2u * q0 + wp, pieces));
#if defined(WTYPE_Q4_K)
  // Q4_K: only the piece's nibbles ride in registers from one step to the next; its block header
  // is loaded again (a cache hit: the lanes of the other piece read it too) where it is decoded,
  // 4 registers a lane fewer (129 took one more than a fourth workgroup an SM needs). H100, 512
  // tokens, us: 2560 -> 10240 222.8 -> 205.4, 10240 -> 2560 274.0 -> 270.8, 2560 -> 2560 74.8
  // -> 76.4.
  const uint w_blk = w_row >> 4;  // 16-byte units
#endif
  vec4 xv[XV];   // float32 inputs (X16 false)
  uvec4 xu[XU];  // or their fp16 form (X16 true)
  if (X16) {
    const uint xo = x_row + BK * q0 / 8u;
    [[unroll]] for (uint j = 0; j < XU; ++j) {
      xu[j] = x_live && in_row(q0, 8u * (XU * xh + j), K) ? actu4[xo + j] : uvec4(0);
    }
  } else {
    const uint xo = x_row + BK * q0 / 4u;
    [[unroll]] for (uint j = 0; j < XV; ++j) {
      xv[j] = x_live && in_row(q0, 4u * (XV * xh + j), K) ? act4[xo + j] : vec4(0);
    }
  }
  for (uint q = q0; q < nq; ++q) {
    {
#if defined(WTYPE_Q4_K)
      raw.hd = wb4[s].w[w_blk + ((2u * q + wp) >> 3) * 9u];
#endif
      if (!kOddPieces || 2u * q + wp < pieces) {
        stage_piece(raw, 2u * q + wp, q, kW + wr * kStride);
      } else {
        stage_zeros(2u * q + wp, q, kW + wr * kStride);
      }
      [[unroll]] for (uint j = 0; j < XU; ++j) {
#ifdef MC_SPLIT
        const vec4 a = xv[2u * j] * kInScale, b = xv[2u * j + 1u] * kInScale;
        const vec4 ha = split_hi(a), hb = split_hi(b);
        smem[kX + xt * kStride + XU * xh + j] = pack8(ha, hb);
        smem[kXLo + xt * kStride + XU * xh + j] =
            pack8((a - ha) * kLoScale, (b - hb) * kLoScale);
#else
        smem[kX + xt * kStride + XU * xh + j] =
            X16 ? xu[j] : pack8(xv[2u * j] * kInScale, xv[2u * j + 1u] * kInScale);
#endif
      }
    }
    barrier();
    if (q + 1u < nq) {
#if defined(WTYPE_Q4_K)
      const uint pn = 2u * (q + 1u) + wp;
      raw.q = wb4[s].w[w_blk + (pn >> 3) * 9u + 1u + (pn & 7u)];
#else
      raw = load_piece(s, w_row, live_piece(2u * (q + 1u) + wp, pieces));
#endif
      if (X16) {
        const uint xo = x_row + BK * (q + 1u) / 8u;
        [[unroll]] for (uint j = 0; j < XU; ++j) {
          xu[j] = x_live && in_row(q + 1u, 8u * (XU * xh + j), K) ? actu4[xo + j] : uvec4(0);
        }
      } else {
        const uint xo = x_row + BK * (q + 1u) / 4u;
        [[unroll]] for (uint j = 0; j < XV; ++j) {
          xv[j] = x_live && in_row(q + 1u, 4u * (XV * xh + j), K) ? act4[xo + j] : vec4(0);
        }
      }
    }
#ifdef MC_KHR
    // (Offsets in uvec4 of 8 halves: FK is a multiple of 8.)
    [[unroll]] for (uint kk = 0; kk < BK / FK; ++kk) {
      [[unroll]] for (uint f = 0; f < FPS; ++f) {
        const uint g = gl_SubgroupID * FPS + f, ti = g / kFragCols, rj = g % kFragCols;
        coopmat<float16_t, gl_ScopeSubgroup, FM, FK, gl_MatrixUseA> a;
        coopmat<float16_t, gl_ScopeSubgroup, FK, FN, gl_MatrixUseB> b;
        coopMatLoad(a, smem, kX + FM * ti * kStride + FK / 8u * kk, kStride,
                    gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(b, smem, kW + FN * rj * kStride + FK / 8u * kk, kStride,
                    gl_CooperativeMatrixLayoutColumnMajor);
        acc[f] = coopMatMulAdd(a, b, acc[f]);
      }
    }
#else
    [[unroll]] for (uint kk = 0; kk < BK / 16u; ++kk) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[FT], b[2];
      [[unroll]] for (uint i = 0; i < FT; ++i) {
        coopMatLoadNV(a[i], smem, kX + (BN / 2u * qt + 16u * i) * kStride + 2u * kk, kStride,
                      false);
      }
      [[unroll]] for (uint i = 0; i < 2; ++i) {
        coopMatLoadNV(b[i], smem, kW + (32u * qr + 16u * i) * kStride + 2u * kk, kStride, true);
      }
      [[unroll]] for (uint i = 0; i < FT; ++i) {
        [[unroll]] for (uint j = 0; j < 2; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
      }
#ifdef MC_SPLIT
      [[unroll]] for (uint i = 0; i < FT; ++i) {
        coopMatLoadNV(a[i], smem, kXLo + (BN / 2u * qt + 16u * i) * kStride + 2u * kk, kStride,
                      false);
      }
      [[unroll]] for (uint i = 0; i < FT; ++i) {
        [[unroll]] for (uint j = 0; j < 2; ++j) {
          acc_lo[i][j] = coopMatMulAddNV(a[i], b[j], acc_lo[i][j]);
        }
      }
#endif
    }
#endif
    barrier();
  }
#ifdef MC_KHR
  [[unroll]] for (uint f = 0; f < FPS; ++f) {
    const uint g = gl_SubgroupID * FPS + f, ti = g / kFragCols, rj = g % kFragCols;
    coopMatStore(acc[f], smem, (FM * ti * kCStride + FN * rj) / 4u, kCStride / 4u,
                 gl_CooperativeMatrixLayoutRowMajor);
  }
#else
  [[unroll]] for (uint i = 0; i < FT; ++i) {
    [[unroll]] for (uint j = 0; j < 2; ++j) {
#ifdef MC_SPLIT
      acc[i][j] = acc[i][j] + acc_lo[i][j] * (1.0 / kLoScale);
#endif
      coopMatStoreNV(acc[i][j], smem,
                     ((BN / 2u * qt + 16u * i) * kCStride + 32u * qr + 16u * j) / 4u,
                     kCStride / 4u, false);
    }
  }
#endif
  barrier();
  const uint part_o = part_row(s, part);
  if (pc.yq_off[s] != ~0u) {
    // y's fp16 form too (the host asks only unsplit, N even: Kernels::writes_h16), two
    // neighbouring outputs an invocation, one word of h16.comp's bits; and the floats unless
    // nothing reads them (kModeHalfOnly).
    const bool floats = (pc.mode[s] & kModeHalfOnly) == 0u;
    for (uint e = tid; e < BN * BM / 2u; e += NI) {
      const uint tt = e / (BM / 2u), r = 2u * (e % (BM / 2u)), o = m0 + r, t = t0 + tt;
      if (t < T && o < N) {
        const uint c = tt * kCStride + r;  // even: both floats in one uvec4
        const uint yo = pc.y_off[s] + t * N + o;
        const vec2 y = vec2(epilogue(s, yo, uintBitsToFloat(smem[c / 4u][c % 4u]) / kInScale),
                            epilogue(s, yo + 1u,
                                     uintBitsToFloat(smem[c / 4u][c % 4u + 1u]) / kInScale));
        if (floats) {
          act[yo] = y.x;
          act[yo + 1u] = y.y;
        }
        actu[pc.yq_off[s] + t * (N / 2u) + o / 2u] = half_pair(y);
      }
    }
    return;
  }
  for (uint e = tid; e < BN * BM; e += NI) {
    const uint tt = e / BM, o = m0 + e % BM, t = t0 + tt;
    if (t < T && o < N) {
      const uint c = tt * kCStride + e % BM;
      const float y = uintBitsToFloat(smem[c / 4u][c % 4u]) / kInScale;
      if (pc.ksplit > 1u) {
        act[part_o + t * pc.part_width + o] = y;
      } else {
        const uint yo = pc.y_off[s] + t * N + o;
        act[yo] = epilogue(s, yo, y);
      }
    }
  }
}
