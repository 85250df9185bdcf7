// The push constants and epilogues every matrix product (mm.comp, mv.comp, mt.comp) shares:
// y[t][o] = epilogue(sum_i W[o][i] * x[t][i]) for up to four weights (gl_WorkGroupID.z).
layout(push_constant) uniform PC {
  uvec4 K;          // inputs (ne[0])
  uvec4 N;          // outputs (ne[1])
  uvec4 x_off;      // act offset of x [T][K]
  uvec4 y_off;      // act offset of y [T][N]
  uvec4 mode;       // 0 store, 1 add (residual), 2 tanh, 3 sigmoid, 4 relu^2
  uvec4 row_bytes;  // bytes per weight row
  // y's second form, ~0u none: mvq.comp with QOUT its int8 form (q8.glsl), mcd.comp its fp16
  // form (h16.comp's), each at this act offset.
  uvec4 yq_off;
  uint T;
  // mc.comp split-K (Kernels::mc_split): ksplit workgroups share a tile, each summing 1 / ksplit
  // of K into partial sums at part_off (token t at t * part_width: per slot s, ksplit rows of
  // N[s], slots one after another), which mc_sum.comp adds and passes through the epilogue.
  uint ksplit;
  uint part_off;
  uint part_width;
}
pc;

// act offset of part `part`'s partial sums of slot s at token 0 (split-K, pc.ksplit > 1).
uint part_row(uint s, uint part) {
  uint o = pc.part_off + part * pc.N[s];
  for (uint j = 0; j < s; ++j) o += pc.ksplit * pc.N[j];
  return o;
}

// pc.mode bit 4 (MmSlot::y_half_only): write only y's fp16 form (mc.comp; others ignore it).
const uint kModeHalfOnly = 16u;

float epilogue(uint s, uint yo, float y) {
  switch (pc.mode[s] & (kModeHalfOnly - 1u)) {
    case 1: return y + act[yo];
    case 2: return tanh(y);
    case 3: return sigmoid(y);
    case 4: y = max(y, 0.0); return y * y;
    default: return y;
  }
}
