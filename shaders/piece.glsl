// 32-weight pieces of a GGUF row for the decode matvec (mv.comp), read with 16-byte loads where
// the type's blocks are 16-byte aligned (F32, F16, BF16, Q4_K, Q5_K), word by word for Q6_K and
// through quant.glsl's decode8 otherwise. Piece p of a row covers two runs of 16 elements, run_a(p) and run_b(p);
// piece() returns them as w[0..3] (run A) and w[4..7] (run B); load_piece() and unpack_piece()
// are its two halves, so a caller can issue several pieces' loads before decoding any.
// With PIECE_AFFINE the type returns small integers and the row's true values are
//   w * aff.x + aff.y (run A),   w * aff.z + aff.w (run B),
// so the caller multiplies after the dot product: the scale and min of a K-quant sub-block are
// applied once per 16 weights instead of once per weight.

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#define PIECE_AFFINE 1
// Block b (256 elements) holds 8 pieces: piece 2c + h reads bytes 16h..16h+15 of the nibble chunk
// c, whose low nibbles are elements 64c + 16h + i (run A, sub-block 2c) and high nibbles
// 64c + 32 + 16h + i (run B, sub-block 2c + 1).
uint run_a(uint p) { return (p >> 3) * 256u + ((p >> 1) & 3u) * 64u + (p & 1u) * 16u; }
uint run_b(uint p) { return run_a(p) + 32u; }
// Where mv.comp keeps element e of a staged input chunk (in floats): 4 floats of padding every
// 64 put the runs of 8 neighbouring lanes (64c + 16h, c < 4, h < 2) in distinct shared-memory
// banks.
uint xs_slot(uint e) { return e + ((e >> 6) << 2); }

// The 6-bit scales and mins of sub-blocks 2c and 2c + 1 from the 12 scale bytes (header words y,
// z, w), as bytes 0 and 1 of (scales, mins): sub-blocks 0-3 are the low 6 bits of y's (scales)
// and z's (mins) bytes, 4-7 the nibbles of w's and the top 2 bits of y's and z's. Without
// branches: neighbouring lanes decode different chunks, and the form with a branch on the
// sub-block, once per sub-block, took a third of the int8 product's time (H200, Q4_K 2560 ->
// 65536 from int8 inputs: 57.4 us, this 42.7; the scales' decoding knocked out 37.4).
uvec2 kscale_pair(uvec4 hd, uint c) {
  const bool up = c >= 2u;
  const uint i = 16u * (c & 1u), mask = up ? 0x0f0fu : 0x3f3fu, top = up ? 0x3030u : 0u;
  return uvec2((((up ? hd.w : hd.y) >> i) & mask) | ((hd.y >> (i + 2u)) & top),
               (((up ? hd.w >> 4 : hd.z) >> i) & mask) | ((hd.z >> (i + 2u)) & top));
}

#ifdef PIECE_UNIFORM_CHUNK
// kscale_pair() for c < 2: the low 6 bits of y's and z's bytes 2c and 2c + 1.
uvec2 hd_y_z_low(uvec4 hd, uint c) {
  const uint i = 16u * c;
  return uvec2((hd.y >> i) & 0x3f3fu, (hd.z >> i) & 0x3f3fu);
}
#endif

// The piece's bytes as loaded: the block header (d, dmin, scales), its 16 nibble bytes and, for
// Q5_K, the 16 bytes of fifth bits.
struct Raw {
  uvec4 hd, q;
#if defined(WTYPE_Q5_K)
  uvec4 qh;
#endif
};

Raw load_piece(uint s, uint rb, uint p) {
  Raw r;
#if defined(WTYPE_Q4_K)
  const uint blk = (rb >> 4) + (p >> 3) * 9u;  // 144-byte blocks in 16-byte units
  r.q = wb4[s].w[blk + 1u + (p & 7u)];
#else
  const uint blk = (rb >> 4) + (p >> 3) * 11u;  // 176-byte blocks: header, qh[32], qs[128]
  r.q = wb4[s].w[blk + 3u + (p & 7u)];
  r.qh = wb4[s].w[blk + 1u + (p & 1u)];
#endif
  r.hd = wb4[s].w[blk];
  return r;
}

// The piece's weights as bytes, four to a word (runs A and B: small non-negative integers) and
// their affine map (above). mvq.comp takes these as they are, for integer dot products.
void piece_bytes(Raw r, uint p, out uvec4 lo, out uvec4 hi, out vec4 aff) {
  const vec2 dm = unpackHalf2x16(r.hd.x);
  const uint c = (p >> 1) & 3u;
#ifdef PIECE_UNIFORM_CHUNK
  // mcd.comp's lanes decode the same chunk (rows apart): a branch on it costs them one side only
  // (H200, 8 tokens: Q4_K 2560 -> 10240 23.2 -> 21.9 us, 2560 -> 2560 11.2 -> 10.4). mc.comp
  // keeps the branch-free form: with the branch its products lost ~1% alone and gen-32 and 1.5B
  // prefill ~5%.
  uvec2 sm;
  if (c < 2u) {
    sm = hd_y_z_low(r.hd, c);
  } else {
    sm = kscale_pair(r.hd, c);
  }
#else
  const uvec2 sm = kscale_pair(r.hd, c);
#endif
  aff = vec4(dm.x * float(sm.x & 255u), -dm.y * float(sm.y & 255u), dm.x * float(sm.x >> 8),
             -dm.y * float(sm.y >> 8));
  lo = r.q & 0x0f0f0f0fu;
  hi = (r.q >> 4) & 0x0f0f0f0fu;
#if defined(WTYPE_Q5_K)
  // Bit 2c (run A) and 2c + 1 (run B) of qh[16h + i] are bit 4 of the elements.
  lo |= ((r.qh >> (2u * c)) & 0x01010101u) << 4;
  hi |= ((r.qh >> (2u * c + 1u)) & 0x01010101u) << 4;
#endif
}

void unpack_piece(Raw r, uint p, out vec4 w[8], out vec4 aff) {
  uvec4 lo, hi;
  piece_bytes(r, p, lo, hi, aff);
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    w[k] = small_bytes(lo[k]);
    w[4 + k] = small_bytes(hi[k]);
  }
}
#else
// Every other type: piece p is elements 32p..32p+31.
uint run_a(uint p) { return 32u * p; }
uint run_b(uint p) { return 32u * p + 16u; }
// As above, for runs 32 floats apart: 4 floats of padding every 32.
uint xs_slot(uint e) { return e + ((e >> 5) << 2); }

#if defined(WTYPE_Q6_K)
#define PIECE_AFFINE 1
// {u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d}, 210 bytes, laid out on the device in groups
// of 8 blocks with their d apart (quant.glsl's q6_block()), so that every field is read with
// aligned words: 4 16-byte loads and 2 words a piece (the file's 2-byte aligned blocks took 20
// word loads; H200, Q6_K 2560 -> 65536 at one token: its loads alone 75 of the product's 92 us).
// Piece p = 8b + 4h + k is elements 128h + 32k + i (i < 32) of block b: low 4 bits in
// ql[64h + 32(k & 1) + i] (nibble k >> 1), top 2 bits at bit 2k of qh[32h + i]; value
// d * scales[16-element run] * (q - 32), so aff = (d * scale A, 0, d * scale B, 0).
struct Raw {
  uvec4 ql[2], qh[2];
  uint sc;  // scales of runs A and B in its two low bytes
  float d;
};

Raw load_piece(uint s, uint rb, uint p) {
  const uint b = p >> 3, h = (p >> 2) & 1u, k = p & 3u, bb = q6_block(rb, b) >> 4;
  Raw r;
  const uint l = bb + 4u * h + 2u * (k & 1u), q = bb + 8u + 2u * h;
  r.ql[0] = wb4[s].w[l];
  r.ql[1] = wb4[s].w[l + 1u];
  r.qh[0] = wb4[s].w[q];
  r.qh[1] = wb4[s].w[q + 1u];
  // Scales 8h + 2k and 8h + 2k + 1: half (k & 1) of word 2h + (k >> 1) of the scales' 16 bytes.
  r.sc = wb[s].w[4u * bb + 48u + 2u * h + (k >> 1)] >> (16u * (k & 1u));
  const uint db = q6_d_byte(rb, b);
  r.d = unpackHalf2x16(wb[s].w[db >> 2] >> (8u * (db & 2u))).x;
  return r;
}

// The piece's 6-bit values q (0..63), four to a word: words 0..3 run A, 4..7 run B.
void q6_values(Raw r, uint p, out uint v[8]) {
  const uint sh = ((p & 3u) >> 1) * 4u, qs = 2u * (p & 3u);
  [[unroll]] for (uint j = 0; j < 8u; ++j) {
    const uint ql = r.ql[j >> 2][j & 3u], qh = r.qh[j >> 2][j & 3u];
    v[j] = ((ql >> sh) & 0x0f0f0f0fu) | (((qh >> qs) & 0x03030303u) << 4);
  }
}

vec4 q6_aff(Raw r) {
  const float a = float(bitfieldExtract(int(r.sc), 0, 8)), b = float(bitfieldExtract(int(r.sc), 8, 8));
  return vec4(r.d * a, 0.0, r.d * b, 0.0);
}

// As signed bytes q - 32 (mvq.comp's integer dot products).
void piece_bytes(Raw r, uint p, out uvec4 lo, out uvec4 hi, out vec4 aff) {
  uint v[8];
  q6_values(r, p, v);
  [[unroll]] for (uint j = 0; j < 8u; ++j) {
    // q - 32 for q < 64 in each byte: flip bit 5, then copy it (the sign) into bits 6 and 7.
    const uint f = v[j] ^ 0x20202020u;
    v[j] = f | ((f & 0x20202020u) * 6u);
  }
  lo = uvec4(v[0], v[1], v[2], v[3]);
  hi = uvec4(v[4], v[5], v[6], v[7]);
  aff = q6_aff(r);
}

void unpack_piece(Raw r, uint p, out vec4 w[8], out vec4 aff) {
  uint v[8];
  q6_values(r, p, v);
  [[unroll]] for (uint j = 0; j < 8u; ++j) w[j] = small_bytes(v[j]) - 32.0;
  aff = q6_aff(r);
}
#else
#if defined(WTYPE_F32)
struct Raw {
  uvec4 w[8];
};
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
struct Raw {
  uvec4 w[4];
};
#else
struct Raw {  // decoded at load: these types' blocks are not 16-byte aligned
  vec4 w[8];
};
#endif

Raw load_piece(uint s, uint rb, uint p) {
  Raw r;
#if defined(WTYPE_F32)
  const uint base = (rb >> 4) + p * 8u;
  [[unroll]] for (uint k = 0; k < 8; ++k) r.w[k] = wb4[s].w[base + k];
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
  const uint base = (rb >> 4) + p * 4u;
  [[unroll]] for (uint k = 0; k < 4; ++k) r.w[k] = wb4[s].w[base + k];
#else
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    float v[8];
    decode8(s, rb, 4u * p + k, v);
    r.w[2 * k] = vec4(v[0], v[1], v[2], v[3]);
    r.w[2 * k + 1] = vec4(v[4], v[5], v[6], v[7]);
  }
#endif
  return r;
}

void unpack_piece(Raw r, uint p, out vec4 w[8], out vec4 aff) {
  aff = vec4(1, 0, 1, 0);
#if defined(WTYPE_F32)
  [[unroll]] for (uint k = 0; k < 8; ++k) w[k] = uintBitsToFloat(r.w[k]);
#elif defined(WTYPE_F16)
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    const uvec4 q = r.w[k];
    w[2 * k] = vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
    w[2 * k + 1] = vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w));
  }
#elif defined(WTYPE_BF16)
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    const uvec4 q = r.w[k];
    w[2 * k] = uintBitsToFloat(uvec4(q.x << 16, q.x & 0xffff0000u, q.y << 16, q.y & 0xffff0000u));
    w[2 * k + 1] =
        uintBitsToFloat(uvec4(q.z << 16, q.z & 0xffff0000u, q.w << 16, q.w & 0xffff0000u));
  }
#else
  w = r.w;
#endif
}
#endif  // WTYPE_Q6_K
#endif

// The piece decoded: w (times aff, see above) are the row's weights.
void piece(uint s, uint rb, uint p, out vec4 w[8], out vec4 aff) {
  unpack_piece(load_piece(s, rb, p), p, w, aff);
}
