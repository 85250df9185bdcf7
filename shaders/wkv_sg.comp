#version 450
// The RWKV-7 recurrence (same arithmetic as wkv.comp) for devices with subgroup shuffles and
// arithmetic. One workgroup per (head, sequence), NS * 4 invocations, over blocks of TB tokens:
//  A. in parallel over the block's tokens and channels: decay w, rate a, value residual, kk
//     normalisation, k update, the bonus coefficient sum(r * k * r_k), into shared memory;
//  B. sequential over the block's tokens: invocation (i, part) owns state row i, columns
//     j = part + 4m; the row's dot products are reduced over its 4 lanes by shuffles. Rows do
//     not interact, so this phase has no barrier at all;
//  C. in parallel again: GroupNorm of each token's head output, bonus, gate.
// Only phase B is sequential, and it is ~NS/4 multiply-adds per token.
// With pc.lora = 1 (decode: a few tokens) the kernel also does the LoRA up products itself
// (phase L, before A): w, a, v and g of the head's channels from the LoRA down outputs and the
// F32 up weights bound as weights 0..3 (w2, a2, g2, v2), 4 invocations per channel. That saves
// a dispatch and the barrier after it per layer; for long chunks the separate product is
// faster, and the host does not set lora.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "q8.glsl"

layout(local_size_x_id = 0) in;              // == NS * 4
layout(constant_id = 1) const uint NS = 64;  // head size
layout(constant_id = 2) const uint TB = 8;   // tokens per block
const uint P = 4;                            // invocations per state row

layout(push_constant) uniform PC {
  uint D;
  uint r_off, k_off, v_off;     // act [T][D]: projections
  uint wl_off, al_off, vl_off;  // act [T][D]: LoRA outputs before w0/a0/v0
  uint g_off;                   // act [T][D]: gate (g2 output)
  uint vf_off;                  // act [T][D]: v_first (written by layer 0)
  uint y_off;                   // act [T][D]: result
  uint w0, a0, v0, k_k, k_a, r_k, lnx_w, lnx_b;  // vecs
  uint state_base;  // float offset within a slot of this layer's rows
  uint slot_floats;
  uint layer0;
  uint meta_seq;
  uint lora;                    // 1: phase L computes wl, al, vl, g (then *_off above unused)
  uint hw_off, ha_off, hv_off, hg_off;  // act [T][rank]: LoRA down outputs
  uint rank_w, rank_a, rank_v, rank_g;  // multiples of 4
  uint y_q8;  // act: y's int8 form (q8.glsl) too, for the output product; ~0u: none
}
pc;

shared float s_w[TB * NS], s_kk[TB * NS], s_ka[TB * NS], s_k[TB * NS], s_r[TB * NS],
    s_v[TB * NS], s_y[TB * NS];
shared vec2 s_part[64];  // per-subgroup partial sums (NS * 4 / subgroup size <= 64)
shared float s_bonus[TB];
shared float s_lw[TB * NS], s_la[TB * NS], s_lv[TB * NS], s_lg[TB * NS];  // phase L results

// Part `part` (of P) of row ch of F32 weight binding s (rank inputs) times h: vec4 j = part + P m.
// Four steps' loads are issued together: at decode this loop is the kernel's latency chain.
float lora_part(uint s, uint ch, uint rank, uint h_off, uint part) {
  const uint w0 = ch * rank / 4u, x0 = h_off / 4u, n = rank / 4u;
  vec4 acc = vec4(0);
  uint j = part;
  for (; j + 3u * P < n; j += 4u * P) {
    vec4 w[4], x[4];
    [[unroll]] for (uint u = 0; u < 4u; ++u) {
      w[u] = uintBitsToFloat(wb4[s].w[w0 + j + u * P]);
      x[u] = act4[x0 + j + u * P];
    }
    acc += (w[0] * x[0] + w[1] * x[1]) + (w[2] * x[2] + w[3] * x[3]);
  }
  for (; j < n; j += P) acc += uintBitsToFloat(wb4[s].w[w0 + j]) * act4[x0 + j];
  return dot(acc, vec4(1));
}

// The 4 lanes of a row (consecutive invocations) add their parts.
float row_sum(float v) {
  v += subgroupShuffleXor(v, 1u);
  return v + subgroupShuffleXor(v, 2u);
}

// Sum of v over the NS channels of the caller's token slot of this pass (its subgroup lies
// inside them).
// Every invocation of the workgroup must call it (it has a barrier).
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

void main() {
  const uint h = gl_WorkGroupID.x, seq = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint D = pc.D;
  const uint slot = meta[pc.meta_seq + 4 * seq], first = meta[pc.meta_seq + 4 * seq + 1],
             n = meta[pc.meta_seq + 4 * seq + 2];
  const uint sb = slot * pc.slot_floats + pc.state_base;
  // Phase B layout: row i, columns part + P*m (interleaved: the 4 lanes of a row hit 4 banks).
  const uint row = tid / P, part = tid % P;
  float S[NS / P];
  [[unroll]] for (uint m = 0; m < NS / P; ++m) {
    S[m] = state[sb + (1 + part + P * m) * D + h * NS + row];
  }
  // Phases A and C layout: token slot tid / NS of the pass, channel tid % NS.
  const uint c = tid % NS, ch = h * NS + c, lanes_tok = (NS * P) / NS;
  const float w0 = vecs[pc.w0 + ch], a0 = vecs[pc.a0 + ch], v0 = vecs[pc.v0 + ch];
  const float kkw = vecs[pc.k_k + ch], kaw = vecs[pc.k_a + ch], rkw = vecs[pc.r_k + ch];
  const float lnw = vecs[pc.lnx_w + ch], lnb = vecs[pc.lnx_b + ch];

  for (uint b0 = 0; b0 < n; b0 += TB) {
    const uint nb = min(TB, n - b0);
    // Passes of phases A and C: only as many as the block's tokens need (one at decode), each
    // with barriers.
    const uint pass_end = (nb + lanes_tok - 1u) / lanes_tok * lanes_tok;
    if (pc.lora != 0) {
      // L: LoRA up products of the block's tokens, channel `row`, 4 lanes each.
      const uint lch = h * NS + row;
      for (uint tt = 0; tt < nb; ++tt) {
        const uint t = first + b0 + tt;
        const float lw = row_sum(lora_part(0u, lch, pc.rank_w, pc.hw_off + t * pc.rank_w, part));
        const float la = row_sum(lora_part(1u, lch, pc.rank_a, pc.ha_off + t * pc.rank_a, part));
        const float lg = row_sum(lora_part(2u, lch, pc.rank_g, pc.hg_off + t * pc.rank_g, part));
        const float lv = pc.layer0 != 0
                             ? 0.0
                             : row_sum(lora_part(3u, lch, pc.rank_v, pc.hv_off + t * pc.rank_v, part));
        if (part == 0) {
          s_lw[tt * NS + row] = lw;
          s_la[tt * NS + row] = la;
          s_lv[tt * NS + row] = lv;
          s_lg[tt * NS + row] = lg;
        }
      }
      barrier();
    }
    // A: per-token, per-channel inputs of the recurrence.
    for (uint tt = tid / NS; tt < pass_end; tt += lanes_tok) {
      const bool live = tt < nb;
      float kr = 0.0, bonus = 0.0;
      if (live) {
        const uint o = (first + b0 + tt) * D + ch;
        const float r = act[pc.r_off + o], k = act[pc.k_off + o];
        float v = act[pc.v_off + o];
        const bool fused = pc.lora != 0;
        const float a = sigmoid(a0 + (fused ? s_la[tt * NS + c] : act[pc.al_off + o]));
        if (pc.layer0 != 0) {
          act[pc.vf_off + o] = v;
        } else {
          v += (act[pc.vf_off + o] - v) *
               sigmoid(v0 + (fused ? s_lv[tt * NS + c] : act[pc.vl_off + o]));
        }
        kr = k * kkw;
        const float k2 = k * (1.0 + (a - 1.0) * kaw);
        bonus = r * k2 * rkw;
        s_w[tt * NS + c] =
            exp(-0.606531 * sigmoid(w0 + (fused ? s_lw[tt * NS + c] : act[pc.wl_off + o])));
        s_ka[tt * NS + c] = a;  // times kk below
        s_k[tt * NS + c] = k2;
        s_r[tt * NS + c] = r;
        s_v[tt * NS + c] = v;
      }
      const vec2 sums = token_sum(vec2(kr * kr, bonus), live);
      if (live) {
        const float kk = kr / max(sqrt(sums.x), 1e-12);
        s_kk[tt * NS + c] = kk;
        s_ka[tt * NS + c] *= kk;
        if (c == 0) s_bonus[tt] = sums.y;
      }
    }
    barrier();
    // B: the recurrence, token after token.
    for (uint tt = 0; tt < nb; ++tt) {
      const uint base = tt * NS + part;
      float sa = 0.0;
      [[unroll]] for (uint m = 0; m < NS / P; ++m) sa -= S[m] * s_kk[base + P * m];
      sa += subgroupShuffleXor(sa, 1u);
      sa += subgroupShuffleXor(sa, 2u);
      const float v = s_v[tt * NS + row];
      float y = 0.0;
      [[unroll]] for (uint m = 0; m < NS / P; ++m) {
        const uint j = base + P * m;
        S[m] = S[m] * s_w[j] + sa * s_ka[j] + v * s_k[j];
        y += S[m] * s_r[j];
      }
      y += subgroupShuffleXor(y, 1u);
      y += subgroupShuffleXor(y, 2u);
      if (part == 0) s_y[tt * NS + row] = y;
    }
    barrier();
    // C: GroupNorm over the head, bonus, gate.
    for (uint tt = tid / NS; tt < pass_end; tt += lanes_tok) {
      const bool live = tt < nb;
      const float y = live ? s_y[tt * NS + c] : 0.0;
      const float mu = token_sum(vec2(y, 0), live).x / float(NS);
      const float var = token_sum(vec2((y - mu) * (y - mu), 0), live).x / float(NS);
      if (live) {
        const uint o = (first + b0 + tt) * D + ch;
        const float yn = (y - mu) * inversesqrt(var + 64e-5) * lnw + lnb;
        const float g = pc.lora != 0 ? s_lg[tt * NS + c] : act[pc.g_off + o];
        const float yo = (yn + s_v[tt * NS + c] * s_bonus[tt]) * g;
        act[pc.y_off + o] = yo;
        s_y[tt * NS + c] = yo;  // for the int8 form (only this invocation reads this element)
      }
    }
    barrier();  // the next block overwrites the shared arrays
    if (pc.y_q8 != ~0u) {
      // y's int8 form: runs of 16 channels (NS is a multiple of 16), 4 invocations each.
      const uint qr = q8_row_floats(D);
      for (uint i = tid; i < nb * (NS / 4u); i += NS * P) {
        const uint tt = i / (NS / 4u), e = 4u * (i % (NS / 4u)), r0 = tt * NS + (e & ~15u);
        vec4 run[4];
        [[unroll]] for (uint k = 0; k < 4; ++k) {
          run[k] = vec4(s_y[r0 + 4 * k], s_y[r0 + 4 * k + 1], s_y[r0 + 4 * k + 2],
                        s_y[r0 + 4 * k + 3]);
        }
        q8_store_quad(pc.y_q8 + (first + b0 + tt) * qr, D, h * NS + (e & ~15u), run, (e / 4u) & 3u);
      }
      barrier();
    }
  }
  [[unroll]] for (uint m = 0; m < NS / P; ++m) {
    state[sb + (1 + part + P * m) * D + h * NS + row] = S[m];
  }
}
