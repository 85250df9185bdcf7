// Bindings every rwkvd kernel shares (one descriptor set layout for all pipelines), and the
// workgroup reduction helpers. Offsets into these buffers arrive as push constants, in floats
// (act/vecs/state) or bytes (weights), so one descriptor set serves many dispatches.
#extension GL_EXT_control_flow_attributes : require

// Per-forward batch description written by the host before each submit (see vk/batch.h):
// tokens at [4t]: {token id, sequence index, position in the sequence's chunk, 0};
// sequences at [meta_seq + 4s]: {slot, first token index, n tokens, 0};
// output rows at [meta_out + i]: token index.
layout(set = 0, binding = 0) readonly buffer Meta { uint meta[]; };
// Activations of the current chunk.
layout(set = 0, binding = 1) buffer Act { float act[]; };
// The same activations as vec4 (regions and rows are multiples of 4 floats): one wide load
// instead of four, which matters on every device and a lot on lavapipe.
layout(set = 0, binding = 1) readonly buffer Act4 { vec4 act4[]; };
// The same as words and 16-byte words, for packed forms of activations (int8: q8.glsl; fp16:
// h16.comp), which must not pass through float loads or stores: those may flush patterns that
// look like denormals.
layout(set = 0, binding = 1) buffer ActU { uint actu[]; };
layout(set = 0, binding = 1) readonly buffer ActU4 { uvec4 actu4[]; };
// And as pairs, for the (d, s) pairs of the int8 form (q8.glsl: at even offsets).
layout(set = 0, binding = 1) readonly buffer Act2 { vec2 act2[]; };
// Every 1-D parameter of the model as float32 (norms, lerps, w0/a0/v0, k_k, k_a, r_k, ln_x).
layout(set = 0, binding = 2) readonly buffer Vecs { float vecs[]; };
// Recurrent state of every slot, docs/STATE_LAYOUT.md layout, slot after slot.
layout(set = 0, binding = 3) buffer State { float state[]; };
// Up to four weight matrices in their GGUF block encoding, read as little-endian words.
layout(set = 0, binding = 4) readonly buffer Weights { uint w[]; } wb[4];
// The same, 16 bytes at a time, for the plain float types (rows are 16-byte aligned).
layout(set = 0, binding = 4) readonly buffer Weights4 { uvec4 w[]; } wb4[4];
// And 8 bytes at a time: four fp16 weights (wkv_sg.comp's F16 LoRA up weights).
layout(set = 0, binding = 4) readonly buffer Weights2 { uvec2 w[]; } wb2[4];

// The workgroup size as an ordinary specialization constant (id 15), which vk/pipelines.cpp
// always sets equal to local_size_x_id 0: lavapipe (Mesa 22.3) reads gl_WorkGroupSize inside
// helper functions as its unspecialized default.
layout(constant_id = 15) const uint WG = 64;
const uint kMaxWg = 256;
shared vec4 red4[kMaxWg];

// Sums v over the workgroup (power-of-two size <= kMaxWg); every invocation gets the result.
// Must be reached by the whole workgroup (uniform control flow). With USE_SUBGROUP (the _sg
// variants, for devices with subgroup arithmetic) subgroups add first and one round through
// shared memory adds their sums: two barriers instead of a tree of log2(WG) + 2 (a row kernel of
// one decoded token is latency bound: the H100 spent ~12 us per LayerNorm + lerps).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
vec4 wg_sum4(vec4 v) {
  v = subgroupAdd(v);
  barrier();  // earlier readers of red4 are done
  if (gl_SubgroupInvocationID == 0) red4[gl_SubgroupID] = v;
  barrier();
  vec4 r = vec4(0);
  for (uint i = 0; i < gl_NumSubgroups; ++i) r += red4[i];
  return r;
}
#else
vec4 wg_sum4(vec4 v) {
  const uint tid = gl_LocalInvocationID.x;
  barrier();  // earlier readers of red4 are done
  red4[tid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) red4[tid] += red4[tid + s];
    barrier();
  }
  return red4[0];
}
#endif

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

// The fp16 form of activations that tensor-core products read (h16.comp writes it, the shifts
// and mcd.comp too): x * 2^-8, two halves a word (the scale: tensor_core.glsl's precision note).
const float kInScale = 1.0 / 256.0;
uint half_pair(vec2 x) { return packHalf2x16(x * kInScale); }
