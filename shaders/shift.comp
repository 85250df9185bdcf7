#version 450
// The shift (shift_row.glsl) as its own dispatch. Grid (T, slices): a single decoded token still
// spreads over D / 4 / WG workgroups, a quad of channels a lane (the host picks the number of
// slices: one on CPU devices, where workgroups are expensive).
#include "common.glsl"

layout(local_size_x_id = 0) in;

#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#define SHIFT_X4(i) act4[i]
#define SHIFT_QUADS_ID 1
#include "shift_row.glsl"

layout(push_constant) uniform PC { ShiftParams p; }
pc;

void main() { shift_token(pc.p, gl_WorkGroupID.x, gl_WorkGroupID.y, gl_NumWorkGroups.y); }
