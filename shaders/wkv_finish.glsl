// The end of the WKV recurrence for one (token, channel) of a head: GroupNorm over the head's
// outputs, then the bonus and the gate. wkv_sg.comp runs it after its recurrence (phase C);
// wkv_out.comp runs it after wkv_long.comp, whose workgroups may each hold only some of a head's
// rows. The same functions in both, so that a token's numbers do not depend on which kernel
// finished it.
// Needs NS (the head size) and s_part (a vec2 per subgroup of the workgroup) declared before.

// Sum of v over the NS channels of the caller's token slot (tid / NS; its subgroup lies inside
// them). Every invocation of the workgroup must call it (it has a barrier).
vec2 token_sum(vec2 v, bool live) {
  const vec2 sg = subgroupAdd(live ? v : vec2(0));
  const uint per = NS / gl_SubgroupSize;  // subgroups per token slot
  if (subgroupElect() && live) s_part[gl_SubgroupID] = sg;
  barrier();
  vec2 total = vec2(0);
  if (live) {
    for (uint q = 0; q < per; ++q) total += s_part[(gl_LocalInvocationID.x / NS) * per + q];
  }
  barrier();  // s_part is reused by the next call
  return total;
}

// The head's GroupNorm of y (weights lnw, lnb), plus vb (wkv_core.glsl's wkv_value_bonus),
// times the gate g.
// Every invocation of the workgroup must call it (token_sum).
float wkv_finish(float y, bool live, float lnw, float lnb, float vb, float g) {
  const float mu = token_sum(vec2(y, 0), live).x / float(NS);
  const float var = token_sum(vec2((y - mu) * (y - mu), 0), live).x / float(NS);
  const float yn = (y - mu) * inversesqrt(var + 64e-5) * lnw + lnb;
  return (yn + vb) * g;
}
