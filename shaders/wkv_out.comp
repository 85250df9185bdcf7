#version 450
// The end of wkv_long.comp, whose workgroups (a head's state rows maybe split over several, pc.flags
// bits 16..23) wrote the raw outputs of their rows to y_off and v * bonus to v_off: here each
// token's head outputs go through the GroupNorm, the bonus and the gate (wkv_finish.glsl, as
// wkv_sg.comp's own phase C) into y_off. One workgroup per (head, token), an invocation per
// channel. With kYHalf, y goes out as its fp16 form alone (h16.comp's bits) at y_q8: what the
// output product reads, so its h16.comp dispatch and the floats are saved.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle_relative : require
#include "common.glsl"

layout(local_size_x_id = 0) in;              // == NS
layout(constant_id = 1) const uint NS = 64;  // head size

#include "wkv_push.glsl"

shared vec2 s_part[NS];  // per subgroup
#include "wkv_finish.glsl"

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, ch = h * NS + gl_LocalInvocationID.x;
  const uint o = t * pc.D + ch;
  const float y = wkv_finish(act[pc.y_off + o], true, vecs[pc.lnx_w + ch], vecs[pc.lnx_b + ch],
                             act[pc.v_off + o], act[pc.g_off + o]);
  if ((pc.flags & kYHalf) == 0u) {
    act[pc.y_off + o] = y;
    return;
  }
  // Channel pairs within a subgroup (NS and the subgroup size are even): the even one writes.
  const float next = subgroupShuffleDown(y, 1u);
  if (ch % 2u == 0u) actu[pc.y_q8 + o / 2u] = half_pair(vec2(y, next));
}
