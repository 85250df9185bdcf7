#version 450
// vk_kernel_bench only (BM_GridBarrier): pc.phases rounds of a trivial step separated by
// device-wide waits (each workgroup counts its arrival on an atomic, then spins until every
// workgroup of the round has arrived), to price such a wait against a dispatch boundary with a
// pipeline barrier (BM_EmptyDispatch): a persistent decode kernel would need ~8 a layer. Every
// workgroup must be resident at once (the bench launches about one an SM); a watchdog ends a
// wait that never completes, so a device that cannot hold them all gives wrong times, not a hang.
layout(local_size_x = 64) in;

layout(set = 0, binding = 1) coherent buffer Sync {
  uint arrived;  // arrivals since the chain started (the host zeroes it)
  uint data[];   // a word per invocation, each round's step
};

layout(push_constant) uniform PC {
  uint phases;
  uint base;  // arrivals before this dispatch (earlier dispatches of the chain)
}
pc;

void main() {
  const uint n = gl_NumWorkGroups.x, i = gl_GlobalInvocationID.x;
  for (uint p = 0u; p < pc.phases; ++p) {
    data[i] += 1u;
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationID.x == 0u) {
      atomicAdd(arrived, 1u);
      const uint target = pc.base + (p + 1u) * n;
      for (uint w = 0u; w < (1u << 22) && atomicAdd(arrived, 0u) < target; ++w) {
      }
    }
    barrier();
  }
}
