// mvq.comp's diagnostic builds for vk_kernel_bench (--diag=mvq_a and so on; results wrong, so
// only bench/ embeds them): one step of the product's loop with parts of it taken away, to split
// a product's time (docs/PERFORMANCE.md). Every loaded word is folded into the sums, so no load is
// narrowed or dropped. MVQ_DIAG:
//   1 (a): the weights' loads alone;
//   3 (c): and the inputs' loads as the product makes them (two runs and two (d, s) pairs a piece);
//   4 (d): those input bytes laid out piece after piece (three 16-byte loads, neighbouring lanes
//          reading neighbouring words);
//   6 (q): the bytes of the subgroup's pieces (whole blocks) read as consecutive words, a lane
//          after another: the most regular loads of the same bytes (Q6_K's 210-byte blocks were
//          only 2-byte aligned, and its pieces read word by word, 20 loads a piece, until its
//          rows took their device form: 8 blocks still take 8 x 210 bytes);
//   5 (e): the whole product without decoding the sub-blocks' scales (in mvq.comp itself).
// Include after the specialization constants, product.glsl, piece.glsl and MVQ_LOAD_STEP.

#if defined(WTYPE_Q6_K)
const uint kDiagBlock = 210u;  // bytes a block (8 pieces)
#elif defined(WTYPE_Q5_K)
const uint kDiagBlock = 176u;
#else
const uint kDiagBlock = 144u;
#endif

uint diag_fold(Raw r) {
#if defined(WTYPE_Q6_K)
  uint f = r.sc ^ floatBitsToUint(r.d);
  const uvec4 g = r.ql[0] ^ r.ql[1] ^ r.qh[0] ^ r.qh[1];
  return f ^ g.x ^ g.y ^ g.z ^ g.w;
#else
  uvec4 f = r.q ^ r.hd;
#if defined(WTYPE_Q5_K)
  f ^= r.qh;
#endif
  return f.x ^ f.y ^ f.z ^ f.w;
#endif
}

// The step of pieces p0 + u * subgroup size (u < U) of rows o0 .. o0 + R - 1 (mvq.comp's loop).
void diag_step(uint s, uint p0, uint lane, uint o0, uint N, uint np, uint K, uint q_row, uint t0,
               inout float acc[4 * 8]) {
#if MVQ_DIAG == 6
  uint fold = 0u;
  [[unroll]] for (uint u = 0; u < U; ++u) {
    const uint pa = min(p0 - lane + u * gl_SubgroupSize, np - 1u) & ~7u;  // (uniform)
    const uint pb = min(pa + gl_SubgroupSize, np);
    [[unroll]] for (uint r = 0; r < R; ++r) {
      const uint rb = min(o0 + r, N - 1u) * pc.row_bytes[s];
      const uint w0 = (rb + (pa >> 3) * kDiagBlock) / 4u, w1 = (rb + (pb >> 3) * kDiagBlock) / 4u;
      for (uint w = w0 + lane; w < w1; w += gl_SubgroupSize) fold ^= wb[s].w[w];
    }
  }
  acc[0] += float(fold & 255u);
#else
  MVQ_LOAD_STEP(raw);  // (mvq.comp)
  [[unroll]] for (uint u = 0; u < U; ++u) {
    [[unroll]] for (uint r = 0; r < R; ++r) acc[r * TT] += float(diag_fold(raw[u][r]) & 255u);
#if MVQ_DIAG >= 3
    const uint p = min(p0 + u * gl_SubgroupSize, np - 1u);
    [[unroll]] for (uint t = 0; t < TT; ++t) {
      const uint qo = pc.x_off[s] + (t0 + t) * q_row, so = qo + K / 4u;
#if MVQ_DIAG == 3
      const uvec4 xa = actu4[(qo + run_a(p) / 4u) / 4u], xb = actu4[(qo + run_b(p) / 4u) / 4u];
      const vec4 d = vec4(act2[(so + run_a(p) / 8u) / 2u], act2[(so + run_b(p) / 8u) / 2u]);
#else
      const uvec4 xa = actu4[qo / 4u + p], xb = actu4[qo / 4u + np + p];
      const vec4 d = act4[so / 4u + p];
#endif
      const uvec4 f = xa ^ xb ^ floatBitsToUint(d);
      acc[t] += float((f.x ^ f.y ^ f.z ^ f.w) & 255u);
    }
#endif
  }
#endif
}
