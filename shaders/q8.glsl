// The int8 ("q8") form of an activation row, which the K-quant decode product (mvq.comp) reads
// instead of floats: 4x fewer bytes per input and four products per instruction (OpSDot).
// A row of K floats (K a multiple of 32) becomes, at a float offset of the act buffer:
//   [0, K/4)          K int8 values, four to a word, element e in byte e % 4 of word e / 4;
//   [K/4, K/4 + K/8)  per run of 16 elements j: (d, s) with x ~= d * q and s the exact float
//                     sum of the run's x (a K-quant's min term needs sum(x), not sum(q)).
// q = round(x / d), d = max|x| / 127 over the run: the same per-block int8 scheme as llama.cpp's
// q8_1 activations, with 16- rather than 32-element blocks (a K-quant sub-block's scale covers 16
// or 32 weights, so 16 costs nothing extra and halves the rounding of large-range runs).

// Floats a row's q8 form takes (its rows are this far apart).
uint q8_row_floats(uint K) { return K / 4u + K / 8u; }

// Writes quad `quad` (elements 4 quad .. 4 quad + 3, values v) of the run of 16 values that starts
// at element e0 of the q8 row at float offset q_row (of K elements): amax is the run's largest
// |x|; quad 0 also writes the run's (d, s), sum being s.
// The int8 values of quad v of a run whose largest |x| is amax, four bytes to a word.
uint q8_word(vec4 v, float amax) {
  const float inv = amax > 0.0 ? 127.0 / amax : 0.0;
  const uvec4 q = uvec4(clamp(ivec4(roundEven(v * inv)), ivec4(-127), ivec4(127))) & 0xffu;
  return q.x | (q.y << 8) | (q.z << 16) | (q.w << 24);
}

void q8_store(uint q_row, uint K, uint e0, vec4 v, float amax, float sum, uint quad) {
  const float d = amax / 127.0;
  actu[q_row + e0 / 4u + quad] = q8_word(v, amax);
  if (quad == 0u) {
    act[q_row + K / 4u + e0 / 8u] = d;
    act[q_row + K / 4u + e0 / 8u + 1u] = sum;
  }
}

// The same from the whole run: the four invocations of a run each call this with the same run.
void q8_store_quad(uint q_row, uint K, uint e0, vec4 run[4], uint quad) {
  const vec4 m = max(max(abs(run[0]), abs(run[1])), max(abs(run[2]), abs(run[3])));
  const vec4 s4 = run[0] + run[1] + run[2] + run[3];
  q8_store(q_row, K, e0, run[quad], max(max(m.x, m.y), max(m.z, m.w)),
           (s4.x + s4.y) + (s4.z + s4.w), quad);
}

#ifdef USE_SUBGROUP  // (the _sg variants that include this enable subgroup shuffles first)
// The largest |x| and the float sum of a run of 16 values whose four quads the four consecutive
// invocations of this one's group of four hold (v: this one's), gathered by shuffles (for quad 0
// the shuffles' order by distance is the run's order). Every invocation of the group must call
// it, in uniform control flow.
void q8_run(vec4 v, out float amax, out float sum) {
  const vec4 r1 = subgroupShuffleXor(v, 1u), r2 = subgroupShuffleXor(v, 2u),
             r3 = subgroupShuffleXor(v, 3u);
  const vec4 m = max(max(abs(v), abs(r1)), max(abs(r2), abs(r3)));
  const vec4 s4 = v + r1 + r2 + r3;  // only quad 0's is used
  amax = max(max(m.x, m.y), max(m.z, m.w));
  sum = (s4.x + s4.y) + (s4.z + s4.w);
}

// The int8 form of quad `quad` (0..3) of such a run (q8_store_quad's numbers); live: whether it
// stores. Every invocation of the group must call it, in uniform control flow.
void q8_store_sg(uint q_row, uint K, uint e0, vec4 v, uint quad, bool live) {
  float amax, sum;
  q8_run(v, amax, sum);
  if (live) q8_store(q_row, K, e0, v, amax, sum, quad);
}
#endif
