#version 450
// Greedy decoding's pick without the logits leaving the device: the largest of each logit row
// (n_vocab floats at src, row after row), in parts. Workgroup (p, r) takes elements
// [p * part, (p + 1) * part) of row r and writes the pair (value bits, index) of its largest
// element at dst + 2 * (r * gl_NumWorkGroups.x + p): the largest value, NaN never winning, and
// the lowest index holding it; index ~0u where the part holds only NaN. The host merges a row's
// pairs by the same rule (Kernels::argmax_of_parts), which is engine::argmax's: the lowest id of
// the largest value. A row of 65536 logits is 64 parts of 1024, one load a lane for 4 elements:
// its 256 KB spread over the GPU instead of one workgroup's reads.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
  uint n;     // elements a row
  uint part;  // elements a workgroup (a multiple of 4 * WG is one pass)
  uint src;   // act offset of row 0
  uint dst;   // act offset of the pairs
}
pc;

shared float s_best[kMaxWg];
shared uint s_at[kMaxWg];

// Whether (v, i) beats (best, at): larger, or as large at a lower index. NaN compares false.
bool beats(float v, uint i, float best, uint at) {
  return v > best || (v == best && i < at);
}

void main() {
  const uint tid = gl_LocalInvocationID.x, p = gl_WorkGroupID.x, r = gl_WorkGroupID.y;
  const uint begin = p * pc.part, end = min(begin + pc.part, pc.n), row = pc.src + r * pc.n;
  float best = uintBitsToFloat(0xff800000u);  // -inf: a value of -inf still takes its index
  uint at = 0xffffffffu;
  for (uint i0 = begin + tid; i0 < end; i0 += 4u * WG) {
    float v[4];
    [[unroll]] for (uint k = 0; k < 4; ++k) {  // all four loads before any compare
      const uint i = i0 + k * WG;
      v[k] = i < end ? act[row + i] : 0.0;
    }
    [[unroll]] for (uint k = 0; k < 4; ++k) {
      const uint i = i0 + k * WG;
      if (i < end && beats(v[k], i, best, at)) {
        best = v[k];
        at = i;
      }
    }
  }
  s_best[tid] = best;
  s_at[tid] = at;
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    barrier();
    if (tid < h && beats(s_best[tid + h], s_at[tid + h], s_best[tid], s_at[tid])) {
      s_best[tid] = s_best[tid + h];
      s_at[tid] = s_at[tid + h];
    }
  }
  if (tid == 0u) {
    const uint o = pc.dst + 2u * (r * gl_NumWorkGroups.x + p);
    actu[o] = floatBitsToUint(s_best[0]);
    actu[o + 1u] = s_at[0];
  }
}
