#version 450
// The second half of a split-K product (mc.comp with pc.ksplit > 1): y[t][o] =
// epilogue(sum over the parts of their partial sums), the parts added in their order, so the
// result does not depend on which workgroup finished first. One invocation per output of a
// slot (gl_WorkGroupID.y).
#include "common.glsl"

layout(local_size_x_id = 0) in;

#include "product.glsl"

void main() {
  const uint s = gl_WorkGroupID.y, N = pc.N[s], i = gl_GlobalInvocationID.x;
  if (i >= pc.T * N) return;
  const uint t = i / N, o = i % N;
  const uint p = part_row(s, 0u) + t * pc.part_width + o;
  float y = 0.0;
  for (uint k = 0; k < pc.ksplit; ++k) y += act[p + k * N];
  const uint yo = pc.y_off[s] + t * N + o;
  act[yo] = epilogue(s, yo, y);
}
