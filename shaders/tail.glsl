// A decode product's tail: with pc.tail set (a word offset into meta, where the forward wrote
// the shift's parameters), the dispatch's last workgroup to finish runs the shift that reads the
// product's output (shift_row.glsl, every token and channel) instead of a dispatch of its own.
// At one token a dependent dispatch and its barrier cost ~3.6 us (H100, vk_kernel_bench
// BM_EmptyDispatch), and a layer had two shifts. The workgroups count themselves out on an
// atomic counter in act (the record's last word; the last one sets it back to zero for the
// next tail): the classic last-block reduction. The product's outputs are stored, and the tail
// reads x, through coherent views, so the last workgroup sees every other one's rows.
// Include after product.glsl; call product_tail() at the end of main() from every invocation.

layout(set = 0, binding = 1) coherent buffer ActC { float actc[]; };
layout(set = 0, binding = 1) coherent readonly buffer ActC4 { vec4 actc4[]; };
layout(set = 0, binding = 1) coherent buffer ActCU { uint actcu[]; };

#extension GL_KHR_shader_subgroup_shuffle : require
#define SHIFT_X4(i) actc4[i]
#define SHIFT_QUADS_ID 5
#include "shift_row.glsl"

shared bool s_tail_last;

// y[yo] = v where a tail may read it.
void store_y(uint yo, float v) { actc[yo] = v; }

ShiftParams tail_params(uint at) {
  ShiftParams a;
  a.D = meta[at];
  a.n_lerp = meta[at + 1];
  a.x_off = meta[at + 2];
  a.out_off = meta[at + 3];
  a.out_stride = meta[at + 4];
  a.save_off = meta[at + 5];
  a.norm_w = meta[at + 6];
  a.norm_b = meta[at + 7];
  a.lerp_off = meta[at + 8];
  a.state_row = meta[at + 9];
  a.slot_floats = meta[at + 10];
  a.commit = meta[at + 11];
  a.commit_src = meta[at + 12];
  a.commit_row = meta[at + 13];
  a.meta_seq = meta[at + 14];
  a.eps = uintBitsToFloat(meta[at + 15]);
  a.q8_mask = meta[at + 16];
  a.q8_off = meta[at + 17];
  a.q8_stride = meta[at + 18];
  a.h16_mask = meta[at + 19];
  a.h16_off = meta[at + 20];
  a.h16_stride = meta[at + 21];
  return a;
}

void product_tail() {
  if (pc.tail == ~0u) return;  // uniform
  memoryBarrierBuffer();  // this invocation's outputs before the count
  barrier();              // every invocation's
  const uint counter = meta[pc.tail + kShiftParamWords];
  if (gl_LocalInvocationIndex == 0u) {
    const uint total = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z;
    s_tail_last = atomicAdd(actcu[counter], 1u) == total - 1u;
  }
  barrier();
  if (!s_tail_last) return;  // uniform: one shared value
  memoryBarrierBuffer();
  const ShiftParams a = tail_params(pc.tail);
  for (uint t = 0; t < pc.T; ++t) shift_token(a, t, 0u, 1u);
  if (gl_LocalInvocationIndex == 0u) actcu[counter] = 0u;
}
