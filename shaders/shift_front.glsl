// A shift of one decoded token in front of the product that reads it (mvq.comp, mvf.comp with
// LN_PROLOGUE), instead of shift.comp's dispatch and the barrier after it: every workgroup
// computes the LayerNorm of the token's x, the lerp with the previous token's normalised x (the
// state's shift row) and hands each quad of the result to the including shader's
// front_store(q, v, live) (called by every invocation, in uniform control flow).
// The workgroup's first LNL lanes hold the quads that shift.comp's LNL lanes hold and add them in
// its order (the other subgroups add zeros), so the values are shift.comp's to the bit.
// The shift's arguments are a record in meta at pc.part_off (Forward writes one per layer and
// shift); with pc.part_width != 0 workgroup 0 also does the shift's stores: xn for the next
// commit, and the commit of the other shift's xn (see shift.comp).
// Needs LNL and LNQ (specialization constants) and front_store() declared before.
layout(set = 0, binding = 2) readonly buffer Vecs4 { vec4 vecs4[]; };
layout(set = 0, binding = 3) buffer State4 { vec4 state4[]; };
layout(set = 0, binding = 1) buffer Act4W { vec4 act4w[]; };

// Record words (Forward::kShiftRecordWords).
const uint kRecX = 0u, kRecNormW = 1u, kRecNormB = 2u, kRecStateRow = 3u, kRecSlotFloats = 4u,
           kRecMetaSeq = 5u, kRecEps = 6u, kRecSave = 7u, kRecCommitSrc = 8u, kRecCommitRow = 9u,
           kRecCommit = 10u;

// K: the row's width; lerp_off: the lerp's vecs offset.
void shift_front(uint K, uint lerp_off) {
  const uint tid = gl_LocalInvocationID.x, rec = pc.part_off, nq = K / 4u;
  const uint x_off = meta[rec + kRecX], norm_w = meta[rec + kRecNormW],
             norm_b = meta[rec + kRecNormB], state_row = meta[rec + kRecStateRow],
             save_off = meta[rec + kRecSave], commit_src = meta[rec + kRecCommitSrc],
             commit_row = meta[rec + kRecCommitRow];
  const float eps = uintBitsToFloat(meta[rec + kRecEps]);
  // The sequence's slot, times the floats of a slot.
  const uint sb = meta[meta[rec + kRecMetaSeq]] * meta[rec + kRecSlotFloats];
  const bool on = tid < LNL, stores = pc.part_width != 0u && gl_WorkGroupID == uvec3(0);
  const bool do_commit = stores && meta[rec + kRecCommit] != 0u;
  vec4 xv[LNQ];
  [[unroll]] for (uint k = 0; k < LNQ; ++k) {
    const uint q = tid + k * LNL;
    xv[k] = on && q < nq ? act4[x_off / 4u + q] : vec4(0);
  }
  vec4 s = vec4(0);
  [[unroll]] for (uint k = 0; k < LNQ; ++k) s.x += dot(xv[k], vec4(1));
  s = wg_sum4(s) / float(K);
  const float mu = s.x;
  vec4 v2 = vec4(0);
  [[unroll]] for (uint k = 0; k < LNQ; ++k) {
    if (on && tid + k * LNL < nq) {
      const vec4 d = xv[k] - mu;
      v2.x += dot(d, d);
    }
  }
  v2 = wg_sum4(v2) / float(K);
  const float rs = inversesqrt(v2.x + eps);
  [[dont_unroll]] for (uint k = 0; k < LNQ; ++k) {
    const uint q = tid + k * LNL, c = 4u * q;
    const bool live = on && q < nq;
    vec4 x = xv[0];  // element k, by selects (as shift.comp)
    [[unroll]] for (uint j = 1; j < LNQ; ++j) {
      if (k == j) x = xv[j];
    }
    vec4 v = vec4(0), xn = vec4(0);
    if (live) {
      xn = (x - mu) * rs * vecs4[(norm_w + c) / 4u] + vecs4[(norm_b + c) / 4u];
      const vec4 dx = state4[(sb + state_row + c) / 4u] - xn;
      v = xn + dx * vecs4[(lerp_off + c) / 4u];
    }
    front_store(q, v, live);
    if (live && stores) {
      act4w[(save_off + c) / 4u] = xn;
      if (do_commit) state4[(sb + commit_row + c) / 4u] = act4[(commit_src + c) / 4u];
    }
  }
  barrier();
}
