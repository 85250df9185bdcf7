#version 450
// The q8 form (q8.glsl) of x [T][K] at x_off, written as T rows of q8_row_floats(K) at q_off:
// for inputs whose producer cannot write it itself (the ffn key product's output, the kernel
// tests). One invocation per 4 elements; a run's four invocations each read its 16 values.
#include "common.glsl"
#include "q8.glsl"

layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
  uint K;
  uint T;
  uint x_off;
  uint q_off;
}
pc;

void main() {
  const uint t = gl_WorkGroupID.y, i = gl_GlobalInvocationID.x;  // i: quad of the row
  if (i >= pc.K / 4u) return;
  const uint e0 = (i / 4u) * 16u, xo = (pc.x_off + t * pc.K + e0) / 4u;
  vec4 run[4];
  [[unroll]] for (uint k = 0; k < 4; ++k) run[k] = act4[xo + k];
  q8_store_quad(pc.q_off + t * q8_row_floats(pc.K), pc.K, e0, run, i % 4u);
}
