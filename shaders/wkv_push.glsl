// The push constants of the WKV kernels (wkv.comp, wkv_sg.comp, wkv_long.comp, wkv_out.comp):
// Kernels' WkvArgs.
layout(push_constant) uniform PC {
  uint D;
  uint r_off, k_off, v_off;     // act [T][D]: projections
  uint wl_off, al_off, vl_off;  // act [T][D]: LoRA outputs before w0/a0/v0
  uint g_off;                   // act [T][D]: gate (g2 output)
  uint vf_off;                  // act [T][D]: v_first (written by layer 0)
  uint y_off;                   // act [T][D]: result
  uint w0, a0, v0, k_k, k_a, r_k, lnx_w, lnx_b;  // vecs
  uint state_base;  // float offset within a slot of this layer's rows
  uint slot_floats;
  // kLayer0: layer 0 (no value residual; v_first written); kLora: phase L computes wl, al, vl
  // and g (then *_off above unused); bits 8..15 (GROUPS): sequences a workgroup takes; bits
  // 16..23: row slices (wkv_long.comp: each workgroup of a (head, sequence) its share of the
  // state rows); bits 24..27 (with kLora): LoRA up weight 0..3 is F16 (else F32).
  uint flags;
  uint meta_seq;
  uint n_seq;  // sequences of the chunk
  uint hw_off, ha_off, hv_off, hg_off;  // act [T][rank]: LoRA down outputs
  uint rank_w, rank_a, rank_v, rank_g;  // multiples of 4
  // act: y's int8 form (q8.glsl) too, for the output product; ~0u: none. With kYHalf
  // (wkv_out.comp): y's fp16 form instead, and no floats.
  uint y_q8;
}
pc;
const uint kLayer0 = 1u, kLora = 2u, kYHalf = 4u, kLoraHalf = 1u << 24;  // pc.flags
