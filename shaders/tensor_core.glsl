// What the tensor-core products (mc.comp for many tokens, mcd.comp for a few) share: both stage
// weights and inputs as fp16 in shared memory for 16 x 16 x 16 matrices accumulating in fp32.
// Include after the shader's `shared uvec4 smem[]`, which stage_piece() writes.
//
// Precision: operands are rounded to fp16 (relative 2^-11). The inputs are scaled by 2^-8 first
// (kInScale, common.glsl; the sums back by 2^8, both exact), so activations up to 2^24 - the
// relu^2 output that feeds the ffn value product can pass fp16's 65504 - stay finite; the cost
// is an absolute rounding of 2^-17 for inputs below 2^-6.

uvec4 pack8(vec4 a, vec4 b) {
  return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

// Decodes piece p (piece.glsl) of a weight row, one of the two pieces of the 64-input step q,
// into the staged row at smem[row0 ..]: 8 uvec4 of fp16 weights in K order (runs A and B land at
// their offsets within the step).
void stage_piece(Raw raw, uint p, uint q, uint row0) {
  vec4 w[8];
  vec4 aff;
  unpack_piece(raw, p, w, aff);
#ifdef PIECE_AFFINE
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    w[k] = w[k] * aff.x + aff.y;
    w[4 + k] = w[4 + k] * aff.z + aff.w;
  }
#endif
  const uint ka = (run_a(p) - 64u * q) / 8u, kb = (run_b(p) - 64u * q) / 8u;
  smem[row0 + ka] = pack8(w[0], w[1]);
  smem[row0 + ka + 1u] = pack8(w[2], w[3]);
  smem[row0 + kb] = pack8(w[4], w[5]);
  smem[row0 + kb + 1u] = pack8(w[6], w[7]);
}

// Stages zeros where piece p of step q would go (a piece past the end of the row).
void stage_zeros(uint p, uint q, uint row0) {
  const uint ka = (run_a(p) - 64u * q) / 8u, kb = (run_b(p) - 64u * q) / 8u;
  smem[row0 + ka] = uvec4(0);
  smem[row0 + ka + 1u] = uvec4(0);
  smem[row0 + kb] = uvec4(0);
  smem[row0 + kb + 1u] = uvec4(0);
}

#ifdef MC_SPLIT
// F16 weights (exact in fp16) take each float input as two fp16 halves, each multiplied into its
// own accumulators, y = acc_hi + acc_lo / kLoScale: ~21 bits of every input (mc.comp's comment).
const bool MC_SPLIT_ON = true;
const float kLoScale = 1024.0;  // |lo| < |x|: no overflow where x is near fp16's largest

// x's high half: its mantissa cut to fp16's 10 bits (so fp16 holds it exactly), 0 below fp16's
// normal range, where lo = (x - hi) * kLoScale takes all of x. Bit operations: computed as
// fp16(x), a compiler folded x - unpackHalf(packHalf(x)) to 0 (on the H100 the products then had
// fp16's error).
vec4 split_hi(vec4 x) {
  const vec4 t = uintBitsToFloat(floatBitsToUint(x) & 0xFFFFE000u);
  return mix(vec4(0), t, greaterThanEqual(abs(x), vec4(1.0 / 16384.0)));
}
#else
const bool MC_SPLIT_ON = false;
#endif
