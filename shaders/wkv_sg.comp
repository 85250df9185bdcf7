#version 450
// The RWKV-7 recurrence (same arithmetic as wkv.comp) for devices with subgroup shuffles and
// arithmetic. One workgroup per (head, sequence), NS * PL invocations, over blocks of TB tokens:
//  A. in parallel over the block's tokens and channels: decay w, rate a, value residual, kk
//     normalisation, k update, the bonus coefficient sum(r * k * r_k), into shared memory;
//  B. sequential over the block's tokens: invocation (i, part) owns state row i, columns
//     j = part + 4m; the row's dot products are reduced over its 4 lanes by shuffles. Rows do
//     not interact, so this phase has no barrier at all;
//  C. in parallel again: GroupNorm of each token's head output, bonus, gate.
// Only phase B is sequential, and it is ~NS/4 multiply-adds per token.
// With pc.lora = 1 (decode: a few tokens) the kernel also does the LoRA up products itself
// (phase L, before A): w, a, v and g of the head's channels from the LoRA down outputs and the
// up weights bound as weights 0..3 (w2, a2, g2, v2; F32 or F16). That saves a dispatch and the
// barrier after it per layer; for long chunks the separate product is faster, and the host does
// not set lora. Phase L is the kernel's latency chain at decode (one workgroup per head reads ~150 KB of
// weights for 2.9B), so it runs on every invocation of the workgroup, PL per channel, with all
// of a lane's weight loads issued before any is used.
// GROUPS (decode of several sequences, one token each): a workgroup takes a group of up to TB
// sequences of its head, so phase L loads the head's weights once for all of them rather than
// once per sequence (2.9B at 8 sequences: 320 workgroups each reading ~150 KB otherwise). Their
// tokens are consecutive (the host lays a chunk's sequences out in order), so the group is one
// block of tokens for phases L, A and C; in phase B each sequence has its own state, and the
// workgroup's WG / (NS * P) sets of NS * P invocations take the group's sequences in turn. Each
// token's arithmetic is the same as in a workgroup of its own.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "q8.glsl"

layout(local_size_x_id = 0) in;              // == NS * PL
layout(constant_id = 1) const uint NS = 64;  // head size
layout(constant_id = 2) const uint TB = 8;   // tokens per block
// Invocations per channel (>= 4): phase L's lanes per channel; phases A and C take WG / NS tokens
// a pass (more tokens a pass: fewer passes, each a memory latency and barriers, for long chunks).
layout(constant_id = 3) const uint PL = 4;
// Weight vec4 a lane of phase L holds (the host sets rank_w + rank_a + rank_g + rank_v <=
// 4 * PL * LL, see Kernels::wkv_key); 0: a variant without phase L.
layout(constant_id = 4) const uint LL = 0;
layout(constant_id = 5) const uint HT = 1;  // tokens whose LoRA down outputs phase L stages at once
// A variant whose workgroups take groups of single-token sequences (pc.flags bits 8..15: up to
// TB of them); a pipeline of its own, so the one-sequence variant carries none of its code.
layout(constant_id = 6) const bool GROUPS = false;
const uint LT = LL > 0u ? TB * NS : 1u;  // phase L results' shared size

#include "wkv_push.glsl"

shared float s_w[TB * NS], s_kk[TB * NS], s_ka[TB * NS], s_k[TB * NS], s_r[TB * NS],
    s_v[TB * NS], s_y[TB * NS];
shared vec2 s_part[NS * PL / 4u];  // per-subgroup partial sums (subgroups hold >= 4)
shared float s_bonus[TB];
shared float s_lw[LT], s_la[LT], s_lv[LT], s_lg[LT];  // phase L results
shared vec4 s_h4[LL > 0u ? HT * PL * LL : 1u];  // phase L: HT tokens' [hw | ha | hg | hv]
#include "wkv_finish.glsl"
#include "wkv_core.glsl"

// Vec4 f of row ch of LoRA up weight b, whose rows hold n vec4: F32, or F16 where pc.flags says so
// (kLoraHalf << b; F16 files keep w2 in F32 and a2, g2, v2 in F16, as the converters write them).
vec4 lora_vec4(uint b, uint n, uint ch, uint f) {
  if ((pc.flags & (kLoraHalf << b)) != 0u) {
    const uvec2 q = wb2[b].w[ch * n + f];
    return vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
  }
  return uintBitsToFloat(wb4[b].w[ch * n + f]);
}

// Weight vec4 f of channel ch in the concatenated rows [w2 | a2 | g2 | v2] (n* vec4 each).
vec4 lora_weight(uint f, uint ch, uvec4 n) {
  if (f < n.x) return lora_vec4(0u, n.x, ch, f);
  f -= n.x;
  if (f < n.y) return lora_vec4(1u, n.y, ch, f);
  f -= n.y;
  if (f < n.z) return lora_vec4(2u, n.z, ch, f);
  return lora_vec4(3u, pc.rank_v / 4u, ch, f - n.z);
}

// Phase L for the block's nb tokens from t0: lane `part` of PL takes vec4 part, part + PL, .. of
// channel ch's concatenated LoRA up rows (loaded once, all loads issued together), dots them
// with each token's staged down outputs, and the PL lanes add. Every invocation must call it.
void lora_up(uint t0, uint nb, uint h) {
  const uint tid = gl_LocalInvocationID.x, ch = tid / PL, part = tid % PL;
  // layer 0 has no value residual: its v rows are never read.
  const uint rank_v = (pc.flags & kLayer0) != 0u ? 0u : pc.rank_v;
  const uvec4 n = uvec4(pc.rank_w, pc.rank_a, pc.rank_g, rank_v) / 4u;
  const uint n_all = n.x + n.y + n.z + n.w, lch = h * NS + ch;
  vec4 w[LL > 0u ? LL : 1u];
  [[unroll]] for (uint i = 0; i < LL; ++i) {
    const uint f = part + PL * i;
#ifdef WKV_DIAG_LORA
    // Diagnostic build (vk_kernel_bench --diag=wkv_lora, timing only, wrong results): phase L without its
    // weights' loads, to price them in the forward, where they come from memory (in
    // vk_kernel_bench they stay in the L2 between repeats).
    w[i] = vec4(float(f < n_all) * 1e-30);
#else
    w[i] = f < n_all ? lora_weight(f, lch, n) : vec4(0);
#endif
  }
  for (uint s0 = 0; s0 < nb; s0 += HT) {
    const uint ns = min(HT, nb - s0);
    barrier();  // earlier readers are done with s_h4
    for (uint i = tid; i < ns * n_all; i += WG) {
      const uint t = t0 + s0 + i / n_all, f = i % n_all;
      uint src = f;
      if (f < n.x) {
        src += (pc.hw_off + t * pc.rank_w) / 4u;
      } else if (f < n.x + n.y) {
        src += (pc.ha_off + t * pc.rank_a) / 4u - n.x;
      } else if (f < n.x + n.y + n.z) {
        src += (pc.hg_off + t * pc.rank_g) / 4u - n.x - n.y;
      } else {
        src += (pc.hv_off + t * pc.rank_v) / 4u - n.x - n.y - n.z;
      }
      s_h4[i] = act4[src];
    }
    barrier();
    for (uint u = 0; u < ns; ++u) {
      vec4 acc = vec4(0);  // w, a, g, v
      [[unroll]] for (uint i = 0; i < LL; ++i) {
        const uint f = part + PL * i;
        if (f < n_all) {
          const float d = dot(w[i], s_h4[u * n_all + f]);
          if (f < n.x) {
            acc.x += d;
          } else if (f < n.x + n.y) {
            acc.y += d;
          } else if (f < n.x + n.y + n.z) {
            acc.z += d;
          } else {
            acc.w += d;
          }
        }
      }
      for (uint o = 1u; o < PL; o <<= 1) acc += subgroupShuffleXor(acc, o);
      if (part == 0u) {
        const uint tt = s0 + u;
        s_lw[tt * NS + ch] = acc.x;
        s_la[tt * NS + ch] = acc.y;
        s_lg[tt * NS + ch] = acc.z;
        s_lv[tt * NS + ch] = acc.w;
      }
    }
  }
}

void main() {
  const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint D = pc.D;
  // The workgroup's sequences: one, or (GROUPS) g of one token each, whose tokens follow one
  // another from the first's, and which phase B takes pb at a time.
  const uint group = GROUPS ? (pc.flags >> 8) & 0xffu : 1u;
  const uint seq0 = gl_WorkGroupID.y * group, g = min(group, pc.n_seq - seq0);
  const uint pb = GROUPS ? WG / (NS * P) : 1u;
  const uint first = meta[pc.meta_seq + 4 * seq0 + 1];
  const uint n = GROUPS ? g : meta[pc.meta_seq + 4 * seq0 + 2];
  // Phase B layout: set q of NS * P invocations (its first sequence), row i, columns part + P*m
  // (interleaved: the 4 lanes of a row hit 4 banks).
  // q (tid / (NS * P)) from the subgroup id: whole subgroups make a set, so the compiler sees the
  // branches around phase B's shuffles uniform in every subgroup and adds no divergence handling
  // (wkv_long.comp, H100: 854 tokens 339 -> 300 us; here, decode, no change measured).
  const uint q = gl_SubgroupID / (NS * P / gl_SubgroupSize);
  const uint row = (tid % (NS * P)) / P, part = tid % P;
  const bool b_lane = q < min(pb, g);
  // S is loaded after phase L (its weight registers are free by then).
  // Phases A and C layout: token slot tid / NS of the pass, channel tid % NS.
  const uint c = tid % NS, ch = h * NS + c, lanes_tok = WG / NS;
  float prm[6];
  wkv_params(ch, prm);
  const float lnw = vecs[pc.lnx_w + ch], lnb = vecs[pc.lnx_b + ch];

  for (uint b0 = 0; b0 < n; b0 += TB) {
    const uint nb = min(TB, n - b0);
    // Passes of phases A and C: only as many as the block's tokens need (one at decode), each
    // with barriers.
    const uint pass_end = (nb + lanes_tok - 1u) / lanes_tok * lanes_tok;
    const bool fused = LL > 0u && (pc.flags & kLora) != 0u;
    if (fused) {
      lora_up(first + b0, nb, h);
      barrier();
    }
    if (b0 == 0) {  // in flight together with phase A's loads
      if (b_lane) {
        load_rows(seq_state_base(seq0 + q), h, row, part);
      } else {
        [[unroll]] for (uint m = 0; m < NS / P; ++m) S[m] = 0.0;
      }
    }
    // A: per-token, per-channel inputs of the recurrence.
    for (uint tt = tid / NS; tt < pass_end; tt += lanes_tok) {
      const bool live = tt < nb;
      const uint o = (first + b0 + tt) * D + ch;
      WkvIn in_ = WkvIn(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
      if (live) {
        const uint e = tt * NS + c;
        in_ = wkv_in(o, true, fused ? s_lw[e] : act[pc.wl_off + o],
                     fused ? s_la[e] : act[pc.al_off + o], fused ? s_lv[e] : act[pc.vl_off + o],
                     prm);
      }
      const vec2 sums = token_sum(vec2(in_.kr * in_.kr, in_.bonus), live);
      if (live) {
        wkv_stage(tt, c, in_, in_.kr / max(sqrt(sums.x), 1e-12));
        if (c == 0) s_bonus[tt] = sums.y;
      }
    }
    barrier();
    // B: the recurrence, token after token; (GROUPS) a set's sequences one after another, each
    // its one token.
    if (GROUPS) {
      for (uint sq = q; sq < nb && b_lane; sq += pb) {
        if (sq != q) {
          store_rows(seq_state_base(seq0 + sq - pb), h, row, part);
          load_rows(seq_state_base(seq0 + sq), h, row, part);
        }
        const float y = recur(sq, row, part);
        if (part == 0) s_y[sq * NS + row] = y;
      }
    } else {
      for (uint tt = 0; tt < nb && b_lane; ++tt) {
        const float y = recur(tt, row, part);
        if (part == 0) s_y[tt * NS + row] = y;
      }
    }
    barrier();
    // C: GroupNorm over the head, bonus, gate. With kYHalf y goes out as its fp16 form alone
    // (below), for an output product on tensor cores: no floats, and no h16.comp dispatch.
    const bool y_half = (pc.flags & kYHalf) != 0u;
    for (uint tt = tid / NS; tt < pass_end; tt += lanes_tok) {
      const bool live = tt < nb;
      const uint o = (first + b0 + tt) * D + ch;
      const float y = live ? s_y[tt * NS + c] : 0.0;
      const float vb = live ? wkv_value_bonus(s_v[tt * NS + c], s_bonus[tt]) : 0.0;
      const float g = live ? (fused ? s_lg[tt * NS + c] : act[pc.g_off + o]) : 0.0;
      const float yo = wkv_finish(y, live, lnw, lnb, vb, g);
      if (live) {
        if (!y_half) act[pc.y_off + o] = yo;
        s_y[tt * NS + c] = yo;  // for the int8 or fp16 form
      }
    }
    barrier();  // the next block overwrites the shared arrays
    if (y_half) {
      // Two neighbouring channels a word (h16.comp's bits), D / 2 words a token.
      for (uint i = tid; i < nb * (NS / 2u); i += WG) {
        const uint tt = i / (NS / 2u), e = 2u * (i % (NS / 2u));
        actu[pc.y_q8 + (first + b0 + tt) * (D / 2u) + (h * NS + e) / 2u] =
            half_pair(vec2(s_y[tt * NS + e], s_y[tt * NS + e + 1u]));
      }
      barrier();
    } else if (pc.y_q8 != ~0u) {
      // y's int8 form: runs of 16 channels (NS is a multiple of 16), 4 invocations each.
      const uint qr = q8_row_floats(D);
      for (uint i = tid; i < nb * (NS / 4u); i += WG) {
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
  if (b_lane) {  // (GROUPS) the set's last sequence
    store_rows(seq_state_base(seq0 + (GROUPS ? q + (g - 1u - q) / pb * pb : 0u)), h, row, part);
  }
}
