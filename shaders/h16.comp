#version 450
// The fp16 form of activations that mc.comp (tensor cores) reads instead of their float32 rows:
// up to eight regions x [T][K] (gl_WorkGroupID.z) become T rows of K / 2 words at h_off, each
// word two halves of x * 2^-8 (half_pair, common.glsl). Half the bytes of the floats:
// every row tile of a product reads all its tokens' inputs, which made those reads most of
// mc.comp's traffic. One invocation per 8 elements.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
  uint T;
  uint K[8];      // elements per row (multiples of 8)
  uint x_off[8];  // act float offset of x [T][K]
  uint h_off[8];  // act float (word) offset of the fp16 form [T][K / 2]
}
pc;

void main() {
  const uint r = gl_WorkGroupID.z, t = gl_WorkGroupID.y, i = gl_GlobalInvocationID.x;
  const uint K = pc.K[r];
  if (i >= K / 8u) return;
  const uint xo = (pc.x_off[r] + t * K) / 4u + 2u * i;
  const vec4 a = act4[xo], b = act4[xo + 1u];
  const uint ho = pc.h_off[r] + t * (K / 2u) + 4u * i;
  actu[ho] = half_pair(a.xy);
  actu[ho + 1u] = half_pair(a.zw);
  actu[ho + 2u] = half_pair(b.xy);
  actu[ho + 3u] = half_pair(b.zw);
}
