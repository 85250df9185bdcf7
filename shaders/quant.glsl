// Decoding of GGUF weight blocks, straight from the file's bytes. One type per compiled variant
// (-DWTYPE_<name>). decode8(s, row_byte, p, v) writes elements 8p..8p+7 of the row that starts
// at byte row_byte of weight binding s. Every type's block is a whole number of 8-element
// pieces, so a matvec thread can own pieces and a block is decoded where it is read.
// Reads may touch up to 4 bytes past a tensor's end: the uploader pads every tensor.

uint rd32(uint s, uint b) {  // unaligned little-endian 32-bit read at byte b
  const uint i = b >> 2, sh = (b & 3u) * 8u;
  const uint lo = wb[s].w[i];
  if (sh == 0u) return lo;
  return (lo >> sh) | (wb[s].w[i + 1u] << (32u - sh));
}
uint rd8(uint s, uint b) { return (wb[s].w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
float rdf16(uint s, uint b) { return unpackHalf2x16(rd32(s, b)).x; }
uint byte_of(uvec2 q, uint k) { return (q[k >> 2] >> ((k & 3u) * 8u)) & 0xffu; }
uvec2 rd64(uint s, uint b) { return uvec2(rd32(s, b), rd32(s, b + 4u)); }

// The four bytes of v, each < 128, as exact floats without int-to-float conversions (a quarter-
// rate instruction on NVIDIA GPUs, and four per four weights were what bounded the decode
// matvec): a byte b placed in the mantissa of 2^23 reads as 2^23 + b * 2^(8j); one fused
// multiply-add by 2^-8j minus the power of two leaves b, exactly.
vec4 small_bytes(uint v) {
  const uint kMagic = 0x4b000000u;  // 2^23
  return vec4(uintBitsToFloat((v & 0xffu) | kMagic) - 8388608.0,
              fma(uintBitsToFloat((v & 0xff00u) | kMagic), 1.0 / 256.0, -32768.0),
              fma(uintBitsToFloat((v & 0xff0000u) | kMagic), 1.0 / 65536.0, -128.0),
              uintBitsToFloat((v >> 24) | kMagic) - 8388608.0);
}

#if defined(WTYPE_F32)
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uint base = (rb >> 4) + p * 2u;
  const vec4 a = uintBitsToFloat(wb4[s].w[base]), b = uintBitsToFloat(wb4[s].w[base + 1u]);
  v = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
}
#elif defined(WTYPE_F16)
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uvec4 q = wb4[s].w[(rb >> 4) + p];
  const vec2 a = unpackHalf2x16(q.x), b = unpackHalf2x16(q.y), c = unpackHalf2x16(q.z),
             d = unpackHalf2x16(q.w);
  v = float[8](a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y);
}
#elif defined(WTYPE_BF16)
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uvec4 q = wb4[s].w[(rb >> 4) + p];
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    v[2 * k] = uintBitsToFloat(q[k] << 16);
    v[2 * k + 1] = uintBitsToFloat(q[k] & 0xffff0000u);
  }
}
#elif defined(WTYPE_Q8_0)
// {f16 d; int8 qs[32]}
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uint bb = rb + (p >> 2) * 34u;
  const float d = rdf16(s, bb);
  const uvec2 q = rd64(s, bb + 2u + (p & 3u) * 8u);
  [[unroll]] for (uint k = 0; k < 8; ++k) v[k] = d * float(bitfieldExtract(int(q[k >> 2]), int((k & 3u) * 8u), 8));
}
#elif defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1)
// q4_0 {f16 d; u8 qs[16]}: element j < 16 is the low nibble of qs[j], j >= 16 the high nibble
// of qs[j-16]; value d*(q-8). q4_1 {f16 d, m; u8 qs[16]}: value d*q + m.
#if defined(WTYPE_Q4_0)
const uint kBlock = 18u, kQs = 2u;
#else
const uint kBlock = 20u, kQs = 4u;
#endif
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uint bb = rb + (p >> 2) * kBlock, sub = p & 3u;
  const float d = rdf16(s, bb);
#if defined(WTYPE_Q4_0)
  const float m = -8.0 * d;
#else
  const float m = rdf16(s, bb + 2u);
#endif
  const uvec2 q = rd64(s, bb + kQs + (sub & 1u) * 8u);
  const uint sh = (sub >> 1) * 4u;
  [[unroll]] for (uint k = 0; k < 8; ++k) v[k] = d * float((byte_of(q, k) >> sh) & 0xfu) + m;
}
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
// q5_0 {f16 d; u32 qh; u8 qs[16]}: like q4_0 with bit j of qh as the 5th bit of element j;
// value d*(q-16). q5_1 {f16 d, m; u32 qh; u8 qs[16]}: value d*q + m.
#if defined(WTYPE_Q5_0)
const uint kBlock = 22u, kQh = 2u;
#else
const uint kBlock = 24u, kQh = 4u;
#endif
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uint bb = rb + (p >> 2) * kBlock, sub = p & 3u;
  const float d = rdf16(s, bb);
#if defined(WTYPE_Q5_0)
  const float m = -16.0 * d;
#else
  const float m = rdf16(s, bb + 2u);
#endif
  const uint qh = rd32(s, bb + kQh);
  const uvec2 q = rd64(s, bb + kQh + 4u + (sub & 1u) * 8u);
  const uint sh = (sub >> 1) * 4u;
  [[unroll]] for (uint k = 0; k < 8; ++k) {
    const uint j = sub * 8u + k;
    v[k] = d * float(((byte_of(q, k) >> sh) & 0xfu) | (((qh >> j) & 1u) << 4)) + m;
  }
}
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]} (144 bytes, 256 elements); q5_K adds
// u8 qh[32] before qs (176 bytes). Sub-block sb (32 elements) has a 6-bit scale and min;
// element 32*sb + l is nibble (sb & 1) of qs[32*(sb/2) + l], plus bit sb of qh[l] for q5_K.
#if defined(WTYPE_Q4_K)
const uint kBlock = 144u, kQs = 16u;
#else
const uint kBlock = 176u, kQs = 48u;
#endif
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uint bb = rb + (p >> 5) * kBlock;
  const uint e0 = (p & 31u) * 8u, sb = e0 >> 5, l0 = e0 & 31u;
  const vec2 dm = unpackHalf2x16(rd32(s, bb));
  uint sc, mn;
  if (sb < 4u) {
    sc = rd8(s, bb + 4u + sb) & 63u;
    mn = rd8(s, bb + 8u + sb) & 63u;
  } else {
    const uint hi = rd8(s, bb + 8u + sb);
    sc = (hi & 0xfu) | ((rd8(s, bb + sb) >> 6) << 4);
    mn = (hi >> 4) | ((rd8(s, bb + 4u + sb) >> 6) << 4);
  }
  const float d = dm.x * float(sc), m = dm.y * float(mn);
  const uvec2 q = rd64(s, bb + kQs + 32u * (sb >> 1) + l0);
  const uint sh = (sb & 1u) * 4u;
#if defined(WTYPE_Q5_K)
  const uvec2 h = rd64(s, bb + 16u + l0);
#endif
  [[unroll]] for (uint k = 0; k < 8; ++k) {
    uint x = (byte_of(q, k) >> sh) & 0xfu;
#if defined(WTYPE_Q5_K)
    x |= ((byte_of(h, k) >> sb) & 1u) << 4;
#endif
    v[k] = d * float(x) - m;
  }
}
#elif defined(WTYPE_Q6_K)
// {u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d} (210 bytes, 256 elements). In half h,
// quarter c, lane l: low 4 bits from ql[64h + 32(c&1) + l] (nibble c>>1), high 2 bits from
// qh[32h + l] bits 2c..2c+1, scale scales[8h + 2c + l/16]; value d*scale*(q-32).
// On the device (engine/vk/device_layout.h) a row is groups of up to 8 blocks: their 8 d in one
// 16-byte word, then each block's first 208 bytes; q6_block() is where block b's ql starts (a
// multiple of 16 from the row), q6_d_byte() where its d is.
uint q6_block(uint rb, uint b) { return rb + (b >> 3) * 1680u + 16u + (b & 7u) * 208u; }
uint q6_d_byte(uint rb, uint b) { return rb + (b >> 3) * 1680u + 2u * (b & 7u); }
void decode8(uint s, uint rb, uint p, out float v[8]) {
  const uint bb = q6_block(rb, p >> 5);
  const uint e0 = (p & 31u) * 8u, h = e0 >> 7, c = (e0 >> 5) & 3u, l0 = e0 & 31u;
  const float d = rdf16(s, q6_d_byte(rb, p >> 5));
  const float sc = float(bitfieldExtract(int(rd8(s, bb + 192u + 8u * h + 2u * c + l0 / 16u)), 0, 8));
  const uvec2 ql = rd64(s, bb + 64u * h + 32u * (c & 1u) + l0);
  const uvec2 qh = rd64(s, bb + 128u + 32u * h + l0);
  const uint sh = (c >> 1) * 4u;
  const float ds = d * sc;
  [[unroll]] for (uint i = 0; i < 2; ++i) {
    // Four 6-bit values per word, each in its own byte.
    const vec4 x = small_bytes(((ql[i] >> sh) & 0x0f0f0f0fu) | (((qh[i] >> (2u * c)) & 0x03030303u) << 4));
    [[unroll]] for (uint k = 0; k < 4; ++k) v[4 * i + k] = ds * (x[k] - 32.0);
  }
}
#else
#error "define one WTYPE_<type>"
#endif
