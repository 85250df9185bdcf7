// The per-token arithmetic of the RWKV-7 recurrence shared by wkv_sg.comp (decode and short
// chunks) and wkv_long.comp (long chunks), so that a token's numbers do not depend on which
// kernel ran it. Needs NS (the head size) and the shared arrays s_w, s_kk, s_ka, s_k, s_r, s_v
// ([token][NS]) declared before.

const uint P = 4;  // invocations per state row in phase B

// Channel ch's w0, a0, v0, k_k, k_a, r_k: wkv_in's p.
void wkv_params(uint ch, out float p[6]) {
  p[0] = vecs[pc.w0 + ch];
  p[1] = vecs[pc.a0 + ch];
  p[2] = vecs[pc.v0 + ch];
  p[3] = vecs[pc.k_k + ch];
  p[4] = vecs[pc.k_a + ch];
  p[5] = vecs[pc.r_k + ch];
}

// Phase A's values for one channel of one token: decay w, rate a, updated key k2, receptance r,
// kr (k * k_k, which the caller normalises over the head), the bonus term r * k2 * r_k, and v
// after the value residual (0 where !own: a row slice reads only its own rows' v, because it
// overwrites them). wl, al, vl: the LoRA up outputs of the channel; p: w0, a0, v0, k_k, k_a, r_k.
struct WkvIn {
  float w, a, k2, r, v, kr, bonus;
};
WkvIn wkv_in(uint o, bool own, float wl, float al, float vl, float p[6]) {
  WkvIn i;
  i.r = act[pc.r_off + o];
  const float k = act[pc.k_off + o];
  i.a = sigmoid(p[1] + al);
  i.v = 0.0;
  if (own) {
    i.v = act[pc.v_off + o];
    if ((pc.flags & kLayer0) != 0u) {
      act[pc.vf_off + o] = i.v;
    } else {
      i.v += (act[pc.vf_off + o] - i.v) * sigmoid(p[2] + vl);
    }
  }
  i.kr = k * p[3];
  i.k2 = k * (1.0 + (i.a - 1.0) * p[4]);
  i.bonus = i.r * i.k2 * p[5];
  i.w = exp(-0.606531 * sigmoid(p[0] + wl));
  return i;
}

// v * bonus rounded on its own (no fused multiply-add into the sum after it): wkv_out.comp
// reads it back from memory, rounded.
float wkv_value_bonus(float v, float bonus) {
  precise const float vb = v * bonus;
  return vb;
}

// Stores channel c of token slot tt of phase A (kk: kr normalised over the head).
void wkv_stage(uint tt, uint c, WkvIn i, float kk) {
  const uint e = tt * NS + c;
  s_w[e] = i.w;
  s_kk[e] = kk;
  s_ka[e] = i.a * kk;
  s_k[e] = i.k2;
  s_r[e] = i.r;
  s_v[e] = i.v;
}

// Phase B: the invocation's part of a state row (columns part + P * m), in registers. (Global:
// glslang matches no array parameter sized by specialization constants.)
float S[NS / P];

// One token (slot tt of the shared arrays) of phase B for the caller's state row: the 4 lanes
// of a row (consecutive invocations) run it together; returns the row's output.
float recur(uint tt, uint row, uint part) {
  const uint base = tt * NS + part;
  float sa = 0.0;
  [[unroll]] for (uint m = 0; m < NS / P; ++m) sa -= S[m] * s_kk[base + P * m];
  sa += subgroupShuffleXor(sa, 1u);
  sa += subgroupShuffleXor(sa, 2u);
  const float v = s_v[tt * NS + row];
  float y = 0.0;
  [[unroll]] for (uint m = 0; m < NS / P; ++m) {
    const uint j = base + P * m;
    S[m] = S[m] * s_w[j] + sa * s_ka[j] + v * s_k[j];
    y += S[m] * s_r[j];
  }
  y += subgroupShuffleXor(y, 1u);
  return y + subgroupShuffleXor(y, 2u);
}

// State row `row` of head h (columns part + P * m) from or to base sb of a sequence's slot.
void load_rows(uint sb, uint h, uint row, uint part) {
  [[unroll]] for (uint m = 0; m < NS / P; ++m) {
    S[m] = state[sb + (1 + part + P * m) * pc.D + h * NS + row];
  }
}
void store_rows(uint sb, uint h, uint row, uint part) {
  [[unroll]] for (uint m = 0; m < NS / P; ++m) {
    state[sb + (1 + part + P * m) * pc.D + h * NS + row] = S[m];
  }
}

// Where sequence seq's rows of this layer lie in the state buffer.
uint seq_state_base(uint seq) {
  return meta[pc.meta_seq + 4 * seq] * pc.slot_floats + pc.state_base;
}
