#include "engine/vk/forward_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/error.h"
#include "engine/vk/device_layout.h"

namespace rwkvd::engine::vk {
namespace {

// Layer 0 has no value residual (it writes v_first): its v1 and v2 are placeholders that the
// forward leaves out.
bool has_value_residual(size_t layer) {
  return layer > 0;
}

// A row's bytes on the device (device_layout.h: Q6_K rows differ from the file's).
uint32_t row_bytes(const GgufTensor* t) {
  return static_cast<uint32_t>(device_row_bytes(t->type, static_cast<uint64_t>(t->ne[0])));
}

// q8: act offset of x's int8 form, for the products that read it (Kernels::reads_q8).
MmSlot slot_for(const GgufTensor* t, uint32_t x, uint32_t y, MmMode mode, uint32_t q8 = kNoQ8) {
  const auto K = static_cast<uint32_t>(t->ne[0]);
  return {K, static_cast<uint32_t>(t->ne[1]), x, y, mode, row_bytes(t), K % 32 == 0 ? q8 : kNoQ8};
}

ActLayout lay_out(const Rwkv7Hparams& hp, uint32_t tc) {
  const uint32_t D = hp.n_embd;
  ActLayout a{};
  uint32_t at = 0;
  auto region = [&](uint32_t width) {  // starting at a multiple of 4 floats (16 bytes)
    const uint32_t o = at;
    at += tc * ((width + 3) / 4 * 4);
    return o;
  };
  a.x = region(D);
  a.lerp = region(6 * D);  // xr, xw, xk, xv, xa, xg: each Tc*D apart
  a.save_a = region(D);
  a.save_f = region(D);
  a.r = region(D);
  a.k = region(D);
  a.v = region(D);
  a.hw = region(hp.rank_w);
  a.ha = region(hp.rank_a);
  a.hv = region(std::max(hp.rank_v, hp.rank_a));
  a.hg = region(hp.rank_g);
  a.wl = region(D);
  a.al = region(D);
  a.vl = region(D);
  a.g = region(D);
  a.vf = region(D);
  a.y = region(D);
  a.fx = region(D);
  a.fh = region(hp.n_ffn);
  a.embd = region(D);
  a.logits = region(hp.n_vocab);
  a.argmax = region(2 * Kernels::argmax_parts(hp.n_vocab));
  a.q_lerp = region(6 * q8_row_floats(D));
  a.q_y = region(q8_row_floats(D));
  a.q_fx = region(q8_row_floats(D));
  a.q_fh = region(q8_row_floats(hp.n_ffn));
  a.q_embd = region(q8_row_floats(D));
  a.h_lerp = region(6 * (D / 2));
  a.h_y = region(D / 2);
  a.h_fx = region(D / 2);
  a.h_fh = region((hp.n_ffn + 1) / 2);
  a.h_embd = region(D / 2);
  a.total = at;
  return a;
}

Step barrier(step::Barrier kind = step::Barrier::kCompute) {
  return {"", {}, kind};
}

}  // namespace

ForwardGeometry ForwardGeometry::fit(const Rwkv7Hparams& hp, uint32_t token_cap, uint32_t seq_cap,
                                     uint64_t max_range, bool say) {
  if (hp.n_embd % 8 != 0 || hp.n_embd % hp.head_size != 0) {
    throw EngineError("vulkan: n_embd must be a multiple of 8 and of the head size");
  }
  // The activations are one storage buffer: fewer tokens per forward where the device's
  // storage buffer range (lavapipe: 128 MiB) cannot hold the requested number.
  const uint64_t fit = max_range / 4 / lay_out(hp, 1).total;
  if (token_cap > fit) {
    if (fit < std::max<uint64_t>(seq_cap, 1)) {
      throw EngineError("vulkan: the device's storage buffer range holds the activations of " +
                        std::to_string(fit) + " tokens, fewer than " + std::to_string(seq_cap) +
                        " sequences need");
    }
    if (say) {
      std::fprintf(stderr,
                   "rwkvd: vulkan: %u tokens per forward exceed the device's storage buffer range; "
                   "using %llu\n",
                   token_cap, static_cast<unsigned long long>(fit));
    }
    token_cap = static_cast<uint32_t>(fit);
  }
  ForwardGeometry g;
  g.act = lay_out(hp, token_cap);
  g.n_embd = hp.n_embd;
  g.n_vocab = hp.n_vocab;
  g.n_layer = hp.n_layer;
  g.token_cap = token_cap;
  g.seq_cap = seq_cap;
  g.out_cap = std::min(token_cap, std::max(seq_cap, kOutRows));
  return g;
}

ForwardPlanner::ForwardPlanner(const Kernels& kernels, const Rwkv7Model& model,
                               const WeightLayout& weights, const ForwardGeometry& geometry)
    : k_(kernels), model_(model), w_(weights), g_(geometry), a_(g_.act), hp_(model.hparams()) {
  for (uint32_t l = 0; l < hp_.n_layer; ++l) add_layer(l);
  head_ = add_groups(
      "mm head",
      {{model.head, slot_for(model.head, a_.embd, a_.logits, MmMode::kStore, a_.q_embd)}})[0];
  decide_fusions();
}

// Splits products into groups of one weight type, at most four each, keeping their order.
std::vector<uint32_t> ForwardPlanner::add_groups(
    const std::string& role, const std::vector<std::pair<const GgufTensor*, MmSlot>>& mats) {
  std::vector<uint32_t> out;
  for (const auto& [t, slot] : mats) {
    uint32_t gi = UINT32_MAX;
    for (const uint32_t i : out) {
      if (groups_[i].type == t->type && groups_[i].slots.size() < kWeightBindings) gi = i;
    }
    if (gi == UINT32_MAX) {
      gi = static_cast<uint32_t>(groups_.size());
      groups_.push_back({role + " " + weight_type_suffix(t->type), t->type, {}, {}});
      out.push_back(gi);
    }
    groups_[gi].tensors.push_back(t);
    groups_[gi].slots.push_back(slot);
  }
  return out;
}

void ForwardPlanner::add_layer(uint32_t l) {
  const Rwkv7Layer& ly = model_.layers()[l];
  const uint32_t TD = g_.token_cap * hp_.n_embd, TQ = g_.token_cap * q8_row_floats(hp_.n_embd);
  // y's int8 form comes from wkv, which not every kernel variant writes.
  const uint32_t q_y = k_.wkv_writes_q8(hp_.head_size) ? a_.q_y : kNoQ8;
  std::vector<std::pair<const GgufTensor*, MmSlot>> first = {
      {ly.receptance,
       slot_for(ly.receptance, a_.lerp + 0 * TD, a_.r, MmMode::kStore, a_.q_lerp + 0 * TQ)},
      {ly.key, slot_for(ly.key, a_.lerp + 2 * TD, a_.k, MmMode::kStore, a_.q_lerp + 2 * TQ)},
      {ly.value, slot_for(ly.value, a_.lerp + 3 * TD, a_.v, MmMode::kStore, a_.q_lerp + 3 * TQ)},
      {ly.w1, slot_for(ly.w1, a_.lerp + 1 * TD, a_.hw, MmMode::kTanh)},
      {ly.a1, slot_for(ly.a1, a_.lerp + 4 * TD, a_.ha, MmMode::kStore)},
      {ly.g1, slot_for(ly.g1, a_.lerp + 5 * TD, a_.hg, MmMode::kSigmoid)}};
  std::vector<std::pair<const GgufTensor*, MmSlot>> second = {
      {ly.w2, slot_for(ly.w2, a_.hw, a_.wl, MmMode::kStore)},
      {ly.a2, slot_for(ly.a2, a_.ha, a_.al, MmMode::kStore)},
      {ly.g2, slot_for(ly.g2, a_.hg, a_.g, MmMode::kStore)}};
  if (has_value_residual(l)) {
    first.push_back({ly.v1, slot_for(ly.v1, a_.lerp + 3 * TD, a_.hv, MmMode::kStore)});
    second.push_back({ly.v2, slot_for(ly.v2, a_.hv, a_.vl, MmMode::kStore)});
  }
  // The LoRA products of a model whose large products are quantised (and run on fp16 tensor
  // cores with many tokens) may too: their F32 weights make few rows, too few tiles for the
  // fp32 kernel to fill the GPU.
  if (ggml_traits(ly.receptance->type).block_elems > 1) {
    for (auto* list : {&first, &second}) {
      for (auto& [t, slot] : *list) slot.half_ok = t->type == GgmlType::F32;
    }
  }
  // Tensor-core products read their inputs' fp16 form (written by their producer or h16.comp),
  // all but the LoRA up products (inputs of four widths, few bytes).
  const uint32_t TH = g_.token_cap * (hp_.n_embd / 2);
  for (auto& [t, sl] : first) sl.h16_off = a_.h_lerp + lerp_index(sl) * TH;
  // The LoRA down products' dispatch goes first: few rows, long ones, so their workgroups start
  // before r/k/v's fill the GPU rather than trail them.
  std::rotate(first.begin(), first.begin() + 3, first.end());
  LayerGroups p;
  p.first = add_groups("mm r,k,v,lora down", first);
  p.second = add_groups("mm lora up", second);
  MmSlot out = slot_for(ly.output, a_.y, a_.x, MmMode::kAdd, q_y);
  MmSlot fkey = slot_for(ly.ffn_key, a_.fx, a_.fh, MmMode::kReluSq, a_.q_fx);
  MmSlot fval = slot_for(ly.ffn_value, a_.fh, a_.x, MmMode::kAdd, a_.q_fh);
  out.h16_off = a_.h_y;
  fkey.h16_off = a_.h_fx;
  fval.h16_off = a_.h_fh;
  p.out = add_groups("mm output", {{ly.output, out}})[0];
  p.fkey = add_groups("mm ffn key", {{ly.ffn_key, fkey}})[0];
  p.fval = add_groups("mm ffn value", {{ly.ffn_value, fval}})[0];
  // Split-K partial sums (Kernels::mc_split) go where the logits will be: the head, the only
  // product that writes them, runs after every layer.
  for (ProductGroup& g : std::span(groups_).subspan(p.first.front())) {
    for (MmSlot& sl : g.slots) {
      sl.part_off = a_.logits;
      sl.part_width = hp_.n_vocab;
    }
  }
  layers_.push_back(std::move(p));
}

// Which layers' LoRA up products wkv does, and which shifts run in front of their products.
void ForwardPlanner::decide_fusions() {
  const PipelineNeeds needs = pipeline_needs(model_, k_);
  if (needs.lora_ranks > 0) {
    for (uint32_t l = 0; l < hp_.n_layer; ++l) {
      const Rwkv7Layer& ly = model_.layers()[l];
      // (Layer 0 has no v2: its slot binds w2 again, which wkv never reads there.)
      lora_up_.push_back({ly.w2, ly.a2, ly.g2, has_value_residual(l) ? ly.v2 : ly.w2});
      for (uint32_t i = 0; i < 4; ++i) {
        if (lora_up_[l][i]->type == GgmlType::F16) layers_[l].lora_half |= kWkvLoraHalf << i;
      }
    }
  }
  att_in_front_ = ffn_in_front_ = true;
  for (uint32_t l = 0; l < hp_.n_layer; ++l) {
    for (const uint32_t gi : layers_[l].first) {
      const ProductGroup& g = groups_[gi];
      att_in_front_ = att_in_front_ && k_.runs_shift_in_front(g.type, g.slots);
    }
    // The ffn key product runs the shift in front where it writes its output's int8 form.
    const MmInput value_input = input_of(products(layers_[l].fval, 1));
    const std::vector<MmSlot> fkey = ffn_key_slots(l, 1, value_input, false);
    ffn_in_front_ = ffn_in_front_ && value_input == MmInput::kInt8 && fkey[0].yq_off != kNoQ8 &&
                    k_.runs_shift_in_front(groups_[layers_[l].fkey].type, fkey);
  }
}

ForwardPlanner::PipelineNeeds ForwardPlanner::pipeline_needs(const Rwkv7Model& model,
                                                             const Kernels& kernels) {
  const Rwkv7Hparams& hp = model.hparams();
  PipelineNeeds n;
  n.types = {model.head->type, model.token_embd->type};
  bool lora_up_ok = true;  // every layer's LoRA up weights are F32 or F16 (wkv_sg.comp reads both)
  for (size_t l = 0; l < model.layers().size(); ++l) {
    const Rwkv7Layer& ly = model.layers()[l];
    const GgufTensor* v1 = has_value_residual(l) ? ly.v1 : ly.w1;
    const GgufTensor* v2 = has_value_residual(l) ? ly.v2 : ly.w2;
    for (const GgufTensor* t : {ly.receptance, ly.key, ly.value, ly.w1, ly.a1, ly.g1, v1, ly.w2,
                                ly.a2, ly.g2, v2, ly.output, ly.ffn_key, ly.ffn_value}) {
      n.types.push_back(t->type);
    }
    for (const GgufTensor* t : {ly.w2, ly.a2, ly.g2, v2}) {
      lora_up_ok = lora_up_ok && (t->type == GgmlType::F32 || t->type == GgmlType::F16);
    }
  }
  std::sort(n.types.begin(), n.types.end());
  n.types.erase(std::unique(n.types.begin(), n.types.end()), n.types.end());
  const uint32_t lora_ranks = hp.rank_w + hp.rank_a + hp.rank_v + hp.rank_g;
  bool fuse = lora_up_ok && kernels.wkv_fuses_lora(hp.head_size, lora_ranks);
  for (const uint32_t rank : {hp.rank_w, hp.rank_a, hp.rank_v, hp.rank_g}) {
    fuse = fuse && rank % 4 == 0;
  }
  n.lora_ranks = fuse ? lora_ranks : 0;
  return n;
}

std::vector<std::string> ForwardPlanner::kernel_choices() const {
  std::vector<std::string> out = k_.choices(hp_.head_size);
  if (!lora_up_.empty()) out.push_back("lora_in_wkv");
  return out;
}

std::vector<std::pair<uint32_t, std::array<uint32_t, ForwardGeometry::kShiftRecordWords>>>
ForwardPlanner::shift_records() const {
  std::vector<std::pair<uint32_t, std::array<uint32_t, ForwardGeometry::kShiftRecordWords>>> out;
  if (!att_in_front_ && !ffn_in_front_) return out;
  for (uint32_t l = 0; l < hp_.n_layer; ++l) {
    for (const ShiftArgs& a : {att_shift(l), ffn_shift(l)}) {
      uint32_t eps_bits = 0;
      std::memcpy(&eps_bits, &a.eps, 4);
      // shaders/shift_front.glsl's record.
      out.push_back({g_.shift_record(l, a.n_lerp == 1),
                     {a.x_off, a.norm_w, a.norm_b, a.state_row, a.slot_floats, a.meta_seq, eps_bits,
                      a.save_off, a.commit_src, a.commit_row, a.commit, 0}});
    }
  }
  return out;
}

std::vector<Step> ForwardPlanner::segment(uint32_t segment, const ForwardShape& s) const {
  std::vector<Step> out;
  if (segment == 0) {
    embed(s, out);
  } else if (segment == hp_.n_layer + 1) {
    head(s, out);
  } else if (segment <= hp_.n_layer) {
    time_mix(segment - 1, s, out);
    wkv(segment - 1, s, out);
    channel_mix(segment - 1, s, out);
  } else {
    throw EngineError("vulkan: no segment " + std::to_string(segment) + " in this forward");
  }
  return out;
}

Step ForwardPlanner::products(uint32_t group, uint32_t T) const {
  return products(group, groups_[group].slots, T);
}

Step ForwardPlanner::products(uint32_t group, std::vector<MmSlot> slots, uint32_t T) const {
  const ProductGroup& g = groups_[group];
  MmPlan plan = k_.plan_mm(g.type, slots, T);
  return {g.label, {SetRef::Kind::kGroup, group}, step::Products{group, std::move(slots), plan}};
}

MmInput ForwardPlanner::input_of(const Step& products) {
  return std::get<step::Products>(products.op).plan.input;
}

void ForwardPlanner::to_half(const std::vector<const Step*>& products, uint32_t T,
                             std::vector<Step>& out) const {
  std::vector<Kernels::HalfRegion> regions;
  for (const Step* p : products) {
    if (input_of(*p) != MmInput::kHalf) continue;
    for (const MmSlot& sl : std::get<step::Products>(p->op).slots) {
      const bool seen =
          std::any_of(regions.begin(), regions.end(),
                      [&](const Kernels::HalfRegion& r) { return r.h_off == sl.h16_off; });
      if (!seen) regions.push_back({sl.K, sl.x_off, sl.h16_off});
    }
  }
  if (regions.empty()) return;
  out.push_back({"h16", {}, step::ToHalf{std::move(regions), T}});
  out.push_back(barrier());
}

uint32_t ForwardPlanner::lerp_index(const MmSlot& slot) const {
  return (slot.x_off - a_.lerp) / (g_.token_cap * hp_.n_embd);
}

void ForwardPlanner::embed(const ForwardShape& s, std::vector<Step>& out) const {
  const EmbedArgs e{hp_.n_embd,
                    row_bytes(model_.token_embd),
                    a_.x,
                    w_.vec(model_.emb_norm_w),
                    w_.vec(model_.emb_norm_b),
                    hp_.ln_eps};
  out.push_back({"embed", {SetRef::Kind::kEmbed, 0}, step::Embed{e, model_.token_embd->type, s.T}});
}

void ForwardPlanner::head(const ForwardShape& s, std::vector<Step>& out) const {
  const uint32_t D = hp_.n_embd;
  // A few logit rows (a few sequences decoding) on tensor cores from embd's fp16 form rather
  // than on the int8 kernel; more keep reading the floats (Kernels::head_on_coopmat).
  std::vector<MmSlot> slots = groups_[head_].slots;
  if (k_.head_on_coopmat(model_.head->type, s.n_logit)) slots[0].h16_off = a_.h_embd;
  const Step head = products(head_, slots, std::max(s.n_logit, 1u));
  // A head on the int8 kernel reads embd's int8 form, which out_ln writes where it can (the
  // logit rows are a prefix of embd), else a q8.comp dispatch.
  const bool head_q8 = s.n_logit > 0 && input_of(head) == MmInput::kInt8;
  const bool ln_q8 = head_q8 && k_.out_ln_writes_q8(D);
  const uint32_t layer_floats = (hp_.head_size + 2) * D;
  const OutLnArgs o{D,
                    a_.x,
                    a_.embd,
                    w_.vec(model_.out_norm_w),
                    w_.vec(model_.out_norm_b),
                    s.n_out,
                    s.B,
                    g_.meta_seq(),
                    g_.meta_out(),
                    static_cast<uint32_t>(hp_.state_floats()),
                    a_.save_f,
                    (hp_.n_layer - 1) * layer_floats + (hp_.head_size + 1) * D,
                    hp_.ln_eps,
                    ln_q8 ? a_.q_embd : kNoQ8};
  out.push_back({"out_ln", {}, step::OutLn{o}});
  if (s.n_logit > 0) {
    out.push_back(barrier());
    if (head_q8 && !ln_q8) {
      out.push_back({"q8 head", {}, step::ToInt8{D, s.n_logit, a_.embd, a_.q_embd}});
      out.push_back(barrier());
    }
    to_half({&head}, s.n_logit, out);
    out.push_back(head);
    if (s.argmax) {
      out.push_back(barrier());
      out.push_back({"argmax", {}, step::Argmax{hp_.n_vocab, s.n_logit, a_.logits, a_.argmax}});
    }
  }
  if (s.n_out > 0) {
    out.push_back(barrier(step::Barrier::kFull));
    const uint64_t logit_bytes = s.argmax
                                     ? uint64_t{s.n_logit} * Kernels::argmax_parts(hp_.n_vocab) * 8
                                     : uint64_t{s.n_logit} * hp_.n_vocab * 4;
    out.push_back({"copy out",
                   {},
                   step::CopyOut{s.n_logit > 0 ? 2u : 1u,
                                 {{{uint64_t{a_.embd} * 4, 0, uint64_t{s.n_out} * D * 4},
                                   {uint64_t{s.argmax ? a_.argmax : a_.logits} * 4,
                                    g_.readback_logits_offset(), logit_bytes}}}}});
  }
  out.push_back(barrier(step::Barrier::kHost));
}

void ForwardPlanner::time_mix(uint32_t l, const ForwardShape& s, std::vector<Step>& out) const {
  const Rwkv7Layer& ly = model_.layers()[l];
  const LayerGroups& p = layers_[l];
  // One token: the shift runs in front of the products that read it (its record in meta); the
  // first product of the step does the shift's stores.
  if (att_in_front_ && s.T == 1) {
    for (const uint32_t gi : p.first) {
      std::vector<MmSlot> slots = groups_[gi].slots;
      for (MmSlot& sl : slots) {
        sl.front = {g_.shift_record(l, false), w_.vec(ly.lerp_fused) + lerp_index(sl) * hp_.n_embd,
                    gi == p.first.front() && &sl == &slots.front()};
      }
      out.push_back(products(gi, std::move(slots), s.T));
    }
  } else {
    std::vector<Step> first;
    for (const uint32_t gi : p.first) first.push_back(products(gi, s.T));
    ShiftArgs tm = att_shift(l);
    add_lerp_forms(first, tm);
    out.push_back({"shift att", {}, step::Shift{tm, s.T}});
    out.push_back(barrier());
    std::vector<const Step*> readers;
    for (const Step& f : first) readers.push_back(&f);
    if (tm.h16_mask == 0) to_half(readers, s.T, out);
    for (Step& f : first) out.push_back(std::move(f));
  }
  out.push_back(barrier());
  if (!fuses_lora(s, l)) {
    for (const uint32_t gi : p.second) out.push_back(products(gi, s.T));
    out.push_back(barrier());
  }
}

// wkv does the LoRA up products of decode forwards of up to Tuning::fused_lora_max_t tokens and
// _b sequences (longer chunks run them as one product, which is faster there, and each
// sequence's workgroups read the weights again), but one sequence with F16 LoRA up weights runs
// them as products.
bool ForwardPlanner::fuses_lora(const ForwardShape& s, uint32_t l) const {
  const Tuning& tn = k_.tuning();
  return !lora_up_.empty() && s.T <= tn.fused_lora_max_t && s.B <= tn.fused_lora_max_b &&
         (s.B > 1 || layers_[l].lora_half == 0);
}

WkvArgs ForwardPlanner::wkv_args(uint32_t l) const {
  const Rwkv7Layer& ly = model_.layers()[l];
  return {hp_.n_embd,
          a_.r,
          a_.k,
          a_.v,
          a_.wl,
          a_.al,
          a_.vl,
          a_.g,
          a_.vf,
          a_.y,
          w_.vec(ly.w0),
          w_.vec(ly.a0),
          w_.vec(ly.v0),
          w_.vec(ly.k_k),
          w_.vec(ly.k_a),
          w_.vec(ly.r_k),
          w_.vec(ly.ln_x_w),
          w_.vec(ly.ln_x_b),
          l * (hp_.head_size + 2) * hp_.n_embd,
          static_cast<uint32_t>(hp_.state_floats()),
          has_value_residual(l) ? 0u : kWkvLayer0,
          g_.meta_seq()};
}

void ForwardPlanner::wkv(uint32_t l, const ForwardShape& s, std::vector<Step>& out) const {
  const uint32_t N = hp_.head_size;
  WkvArgs wk = wkv_args(l);
  const bool fuse = fuses_lora(s, l);
  if (fuse) {
    wk.flags |= kWkvLora | layers_[l].lora_half;
    wk.hw_off = a_.hw;
    wk.ha_off = a_.ha;
    wk.hv_off = a_.hv;
    wk.hg_off = a_.hg;
    wk.rank_w = hp_.rank_w;
    wk.rank_a = hp_.rank_a;
    wk.rank_v = hp_.rank_v;
    wk.rank_g = hp_.rank_g;
  }
  const Step output = products(layers_[l].out, s.T);
  if (input_of(output) == MmInput::kInt8) wk.y_q8 = a_.q_y;
  // The output product reads y's fp16 form alone (on tensor cores): wkv writes just that, and no
  // h16.comp dispatch and barrier make it.
  const bool y_half = input_of(output) == MmInput::kHalf && k_.wkv_writes_h16(N, s.longest_or_t());
  if (y_half) {
    wk.flags |= kWkvYHalf;
    wk.y_q8 = a_.h_y;
  }
  const SetRef set = fuse ? SetRef{SetRef::Kind::kLora, l} : SetRef{};
  out.push_back({"wkv", set, step::Wkv{wk, hp_.n_head, N, s.B, s.T, s.longest_or_t()}});
  out.push_back(barrier());
  if (!y_half) to_half({&output}, s.T, out);
  out.push_back(output);
  out.push_back(barrier());
}

std::vector<MmSlot> ForwardPlanner::ffn_key_slots(uint32_t l, uint32_t T, MmInput value_input,
                                                  bool front) const {
  const ProductGroup& key = groups_[layers_[l].fkey];
  std::vector<MmSlot> slots = key.slots;
  const MmInput key_input = k_.plan_mm(key.type, slots, T).input;
  const uint32_t D = hp_.n_embd, F = hp_.n_ffn;
  if (value_input == MmInput::kInt8 && key_input == MmInput::kInt8 &&
      k_.writes_q8(key.type, D, F, T)) {
    slots[0].yq_off = a_.q_fh;
    if (front) {
      slots[0].front = {g_.shift_record(l, true), w_.vec(model_.layers()[l].ffn_lerp_k), true};
    }
  } else if (value_input == MmInput::kHalf && k_.writes_h16(key.type, slots, T)) {
    slots[0].yh_off = a_.h_fh;
    slots[0].y_half_only = true;  // the ffn value product reads fh in fp16 alone
  }
  return slots;
}

void ForwardPlanner::channel_mix(uint32_t l, const ForwardShape& s, std::vector<Step>& out) const {
  const LayerGroups& p = layers_[l];
  const Step value = products(p.fval, s.T);
  const MmInput value_input = input_of(value);
  const bool front = ffn_in_front_ && s.T == 1;
  const Step key = products(p.fkey, ffn_key_slots(l, s.T, value_input, front), s.T);
  const MmSlot& key_slot = std::get<step::Products>(key.op).slots[0];
  ShiftArgs cm = ffn_shift(l);
  // The form the ffn key product reads, from the shift itself; its floats are then not written.
  if (input_of(key) == MmInput::kInt8) {
    cm.q8_mask = 1;
    cm.q8_off = a_.q_fx;
  }
  if (input_of(key) == MmInput::kHalf) {
    cm.h16_mask = 1;
    cm.h16_off = a_.h_fx;
  }
  cm.f32_skip = cm.q8_mask | cm.h16_mask;
  if (!front) {
    out.push_back({"shift ffn", {}, step::Shift{cm, s.T}});
    out.push_back(barrier());
  }
  if (cm.h16_mask == 0) to_half({&key}, s.T, out);
  out.push_back(key);
  out.push_back(barrier());
  // The ffn value product's int8 or fp16 input: written by the ffn key product where it can,
  // else by a dispatch of its own.
  if (value_input == MmInput::kInt8 && key_slot.yq_off == kNoQ8) {
    out.push_back({"q8 ffn", {}, step::ToInt8{hp_.n_ffn, s.T, a_.fh, a_.q_fh}});
    out.push_back(barrier());
  }
  if (key_slot.yh_off == kNoQ8) to_half({&value}, s.T, out);
  out.push_back(value);
}

ShiftArgs ForwardPlanner::att_shift(uint32_t l) const {
  const uint32_t D = hp_.n_embd, N = hp_.head_size;
  const uint32_t layer_floats = (N + 2) * D;
  const Rwkv7Layer& ly = model_.layers()[l];
  ShiftArgs tm{D,
               6,
               a_.x,
               a_.lerp,
               g_.token_cap * D,
               a_.save_a,
               w_.vec(ly.attn_norm_w),
               w_.vec(ly.attn_norm_b),
               w_.vec(ly.lerp_fused),
               l * layer_floats,
               static_cast<uint32_t>(hp_.state_floats()),
               l > 0 ? 1u : 0u,
               a_.save_f,
               l > 0 ? (l - 1) * layer_floats + (N + 1) * D : 0,
               g_.meta_seq(),
               hp_.ln_eps};
  return tm;
}

// Which lerps the planned products read in each form: the shift writes their int8 and fp16 forms
// itself (no q8 or h16 dispatch and barrier), and the floats only where some product reads them
// (or h16.comp makes the fp16 form from them).
void ForwardPlanner::add_lerp_forms(const std::vector<Step>& first, ShiftArgs& tm) const {
  uint32_t int8 = 0, half = 0, floats = 0;
  for (const Step& f : first) {
    uint32_t bits = 0;
    for (const MmSlot& sl : std::get<step::Products>(f.op).slots) bits |= 1u << lerp_index(sl);
    const MmInput in = input_of(f);
    (in == MmInput::kInt8 ? int8 : in == MmInput::kHalf ? half : floats) |= bits;
  }
  const uint32_t D = hp_.n_embd;
  tm.q8_mask = int8;
  tm.q8_off = a_.q_lerp;
  tm.q8_stride = g_.token_cap * q8_row_floats(D);
  tm.h16_mask = half;
  tm.h16_off = a_.h_lerp;
  tm.h16_stride = g_.token_cap * (D / 2);
  tm.f32_skip = ((1u << tm.n_lerp) - 1u) & ~floats;
}

ShiftArgs ForwardPlanner::ffn_shift(uint32_t l) const {
  const uint32_t D = hp_.n_embd, N = hp_.head_size;
  const uint32_t lbase = l * (N + 2) * D;
  const Rwkv7Layer& ly = model_.layers()[l];
  ShiftArgs cm{D,
               1,
               a_.x,
               a_.fx,
               g_.token_cap * D,
               a_.save_f,
               w_.vec(ly.attn_norm2_w),
               w_.vec(ly.attn_norm2_b),
               w_.vec(ly.ffn_lerp_k),
               lbase + (N + 1) * D,
               static_cast<uint32_t>(hp_.state_floats()),
               1,
               a_.save_a,
               lbase,
               g_.meta_seq(),
               hp_.ln_eps};
  return cm;
}

}  // namespace rwkvd::engine::vk
