#version 450
// The shift (shift_row.glsl) as its own dispatch. Grid (T, slices): a single decoded token still
// spreads over D / WG workgroups (the host picks the number of slices: one on CPU devices, where
// workgroups are expensive).
#include "common.glsl"

layout(local_size_x_id = 0) in;

#define SHIFT_X(i) act[i]
#define SHIFT_X4(i) act4[i]
#include "shift_row.glsl"

layout(push_constant) uniform PC { ShiftParams p; }
pc;

void main() { shift_token(pc.p, gl_WorkGroupID.x, gl_WorkGroupID.y, gl_NumWorkGroups.y); }
