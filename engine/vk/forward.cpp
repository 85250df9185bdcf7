#include "engine/vk/forward.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/error.h"
#include "engine/vk/device_layout.h"
#include "engine/vk/vk_check.h"

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

}  // namespace

ForwardBuffers ForwardBuffers::make(Device& dev, const Rwkv7Hparams& hp, uint32_t token_cap,
                                    uint32_t seq_cap, uint32_t n_slots) {
  const uint32_t D = hp.n_embd;
  if (D % 8 != 0 || hp.n_embd % hp.head_size != 0) {
    throw EngineError("vulkan: n_embd must be a multiple of 8 and of the head size");
  }
  ForwardBuffers b;
  ActLayout& a = b.layout;
  // Activation regions, each [tc][width] floats.
  auto lay_out = [&](uint32_t tc) {
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
  };
  // The activations are one storage buffer: fewer tokens per forward where the device's
  // storage buffer range (lavapipe: 128 MiB) cannot hold the requested number.
  lay_out(1);
  const uint64_t fit = dev.props().limits.maxStorageBufferRange / 4 / a.total;
  if (token_cap > fit) {
    if (fit < std::max<uint64_t>(seq_cap, 1)) {
      throw EngineError("vulkan: the device's storage buffer range holds the activations of " +
                        std::to_string(fit) + " tokens, fewer than " + std::to_string(seq_cap) +
                        " sequences need");
    }
    std::fprintf(stderr,
                 "rwkvd: vulkan: %u tokens per forward exceed the device's storage buffer range; "
                 "using %llu\n",
                 token_cap, static_cast<unsigned long long>(fit));
    token_cap = static_cast<uint32_t>(fit);
  }
  const uint32_t Tc = token_cap;
  b.token_cap = Tc;
  b.seq_cap = seq_cap;
  b.out_cap = std::min(Tc, std::max(seq_cap, kOutRows));
  lay_out(Tc);
  const auto start = std::chrono::steady_clock::now();
  b.act = Buffer(dev, VkDeviceSize{a.total} * 4, MemKind::kDevice);
  b.state = Buffer(dev, VkDeviceSize{n_slots} * hp.state_floats() * 4, MemKind::kDevice);
  // Every row kernel and wkv reads the batch description, some through two dependent loads:
  // from host memory each such load crosses PCIe, microseconds per dispatch.
  const MemKind meta_kind =
      dev.tuning().meta_device_local ? MemKind::kDeviceMapped : MemKind::kUpload;
  b.meta = Buffer(
      dev,
      (4 * VkDeviceSize{Tc} + 4 * seq_cap + Tc + 2 * hp.n_layer * Forward::kShiftRecordWords) * 4,
      meta_kind);
  const auto readback_start = std::chrono::steady_clock::now();
  b.readback = Buffer(dev, VkDeviceSize{b.out_cap} * (D + hp.n_vocab) * 4, MemKind::kReadback);
  b.readback_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - readback_start).count();
  Commands cmds(dev);  // its own pool: this may run on another thread than the Forward's
  cmds.run_now([&](VkCommandBuffer cb) {
    vkCmdFillBuffer(cb, b.state.handle(), 0, VK_WHOLE_SIZE, 0);
    vkCmdFillBuffer(cb, b.act.handle(), 0, VK_WHOLE_SIZE, 0);
  });
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return b;
}

Forward::Forward(Device& dev, Pipelines& pipes, WeightStore& weights, const Rwkv7Model& model,
                 ForwardBuffers buffers)
    : dev_(dev),
      w_(weights),
      model_(model),
      hp_(model.hparams()),
      token_cap_(buffers.token_cap),
      seq_cap_(buffers.seq_cap),
      out_cap_(buffers.out_cap),
      kernels_(dev, pipes),
      act_(std::move(buffers.act)),
      state_(std::move(buffers.state)),
      meta_(std::move(buffers.meta)),
      readback_(std::move(buffers.readback)),
      a_(buffers.layout),
      cmds_(dev),
      profiler_(dev) {
  const uint32_t D = hp_.n_embd;
  const uint32_t Tc = token_cap_;
  const uint32_t L = hp_.n_layer;
  sets_ = std::make_unique<DescriptorSets>(dev, pipes.set_layout(), 3 + 16 * L);
  SetBindings base;
  base.meta = {meta_.handle(), 0, VK_WHOLE_SIZE};
  base.act = {act_.handle(), 0, VK_WHOLE_SIZE};
  base.vecs = {w_.vecs().handle(), 0, VK_WHOLE_SIZE};
  base.state = {state_.handle(), 0, VK_WHOLE_SIZE};
  base.weights[0] = base.vecs;  // kernels without weights still need a valid binding
  base_set_ = sets_->make(base);
  SetBindings emb = base;
  emb.weights[0] = w_.range(model.token_embd);
  embed_set_ = sets_->make(emb);

  const uint32_t TD = Tc * D, TQ = Tc * q8_row_floats(D);
  // y's int8 form comes from wkv, which not every kernel variant writes.
  const uint32_t q_y = kernels_.wkv_writes_q8(hp_.head_size) ? a_.q_y : kNoQ8;
  for (uint32_t l = 0; l < L; ++l) {
    const Rwkv7Layer& ly = model.layers()[l];
    LayerPlan p;
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
    // fp32 kernel to fill the GPU (H100, 2.9B Q4_K_M prefill: 233 us per layer, see
    // docs/PERFORMANCE.md).
    if (ggml_traits(ly.receptance->type).block_elems > 1) {
      for (auto* list : {&first, &second}) {
        for (auto& [t, slot] : *list) slot.half_ok = t->type == GgmlType::F32;
      }
    }
    // The LoRA down products' dispatch goes first: few rows, long ones, so their workgroups start
    // before r/k/v's fill the GPU rather than trail them (H100, 2.9B Q4_K_M: gen-1 342 -> 349,
    // prefill 7826 -> 8010 tok/s).
    std::rotate(first.begin(), first.begin() + 3, first.end());
    p.first = group("mm r,k,v,lora down", first);
    p.second = group("mm lora up", second);
    p.out = group("mm output", {{ly.output, slot_for(ly.output, a_.y, a_.x, MmMode::kAdd, q_y)}});
    p.fkey = group("mm ffn key",
                   {{ly.ffn_key, slot_for(ly.ffn_key, a_.fx, a_.fh, MmMode::kReluSq, a_.q_fx)}});
    p.fval = group("mm ffn value",
                   {{ly.ffn_value, slot_for(ly.ffn_value, a_.fh, a_.x, MmMode::kAdd, a_.q_fh)}});
    // Tensor-core products read their inputs' fp16 form (record_half() writes it), all but the
    // LoRA up products (inputs of four widths, few bytes).
    const uint32_t TH = Tc * (D / 2);
    for (MmGroup& g : p.first) {
      for (MmSlot& sl : g.slots) sl.h16_off = a_.h_lerp + lerp_index(sl) * TH;
    }
    p.out[0].slots[0].h16_off = a_.h_y;
    p.fkey[0].slots[0].h16_off = a_.h_fx;
    p.fval[0].slots[0].h16_off = a_.h_fh;
    for (auto* gs : {&p.first, &p.second, &p.out, &p.fkey, &p.fval}) {
      for (MmGroup& g : *gs) {
        // Split-K partial sums (Kernels::mc_split) go where the logits will be: the head, the
        // only product that writes them, runs after every layer.
        for (MmSlot& sl : g.slots) {
          sl.part_off = a_.logits;
          sl.part_width = hp_.n_vocab;
        }
      }
    }
    layers_.push_back(std::move(p));
  }
  head_ =
      group("mm head",
            {{model.head, slot_for(model.head, a_.embd, a_.logits, MmMode::kStore, a_.q_embd)}});
  const PipelineNeeds needs = pipeline_needs(model, kernels_);
  fuse_lora_ = needs.lora_ranks > 0;
  if (fuse_lora_) {
    for (uint32_t l = 0; l < L; ++l) {
      const Rwkv7Layer& ly = model.layers()[l];
      // (Layer 0 has no v2: its slot binds w2 again, which wkv never reads there.)
      const GgufTensor* up[4] = {ly.w2, ly.a2, ly.g2, has_value_residual(l) ? ly.v2 : ly.w2};
      SetBindings b = base;
      for (uint32_t i = 0; i < 4; ++i) {
        b.weights[i] = w_.range(up[i]);
        if (up[i]->type == GgmlType::F16) layers_[l].lora_half |= kWkvLoraHalf << i;
      }
      layers_[l].lora_set = sets_->make(b);
    }
  }
  kernels_.warm(needs.types, hp_.n_embd, hp_.head_size, needs.lora_ranks, model_.head->type);
  // One token's shifts run in front of the products that read them where those can (short
  // rows): the shifts' argument records go after the batch description, written once.
  fuse_att_shift_ = fuse_ffn_shift_ = true;
  for (const LayerPlan& p : layers_) {
    for (const MmGroup& g : p.first) {
      fuse_att_shift_ = fuse_att_shift_ && kernels_.runs_shift_in_front(g.type, g.slots);
    }
    std::vector<MmSlot> fkey = p.fkey[0].slots;
    fkey[0].yq_off = a_.q_fh;
    fuse_ffn_shift_ = fuse_ffn_shift_ && p.fkey.size() == 1 && fkey_writes_q8(p, 1) &&
                      kernels_.runs_shift_in_front(p.fkey[0].type, fkey);
  }
  if (fuse_att_shift_ || fuse_ffn_shift_) {
    auto* meta = static_cast<uint32_t*>(meta_.mapped());
    for (uint32_t l = 0; l < L; ++l) {
      for (const ShiftArgs& a : {att_shift(l, 1), ffn_shift(l, 1)}) {
        uint32_t eps_bits = 0;
        std::memcpy(&eps_bits, &a.eps, 4);
        // shaders/shift_front.glsl's record.
        const uint32_t rec[kShiftRecordWords] = {a.x_off,       a.norm_w,     a.norm_b, a.state_row,
                                                 a.slot_floats, a.meta_seq,   eps_bits, a.save_off,
                                                 a.commit_src,  a.commit_row, a.commit, 0};
        std::memcpy(meta + shift_record(l, a.n_lerp == 1), rec, sizeof(rec));
      }
    }
    meta_.flush(0, meta_.size());
  }
  // Decode dispatches of the last layer (it has every product).
  dispatches_per_layer_ = 3;  // two shifts and wkv; the rest are matrix products
  for (auto* gs : {&layers_.back().first, &layers_.back().second, &layers_.back().out,
                   &layers_.back().fkey, &layers_.back().fval}) {
    if (gs == &layers_.back().second && fuse_lora_ && layers_.back().lora_half == 0) continue;
    dispatches_per_layer_ += static_cast<uint32_t>(gs->size());
  }
  if (reads_q8(layers_.back().fval, 1) && !fkey_writes_q8(layers_.back(), 1)) {
    ++dispatches_per_layer_;  // fh's int8 form
  }
  // y's and fh's fp16 form (record_half), where their products read it and nothing else
  // writes it.
  if (reads_h16(layers_.back().out, 1)) ++dispatches_per_layer_;
  if (reads_h16(layers_.back().fval, 1) && !fkey_writes_h16(layers_.back(), 1)) {
    ++dispatches_per_layer_;
  }
  if (fuse_att_shift_) --dispatches_per_layer_;  // the shifts' own
  if (fuse_ffn_shift_) --dispatches_per_layer_;
}

ShiftArgs Forward::att_shift(uint32_t l, uint32_t T) const {
  const uint32_t D = hp_.n_embd, N = hp_.head_size;
  const uint32_t layer_floats = (N + 2) * D;
  const Rwkv7Layer& ly = model_.layers()[l];
  const LayerPlan& p = layers_[l];
  ShiftArgs tm{D,
               6,
               a_.x,
               a_.lerp,
               token_cap_ * D,
               a_.save_a,
               w_.vec(ly.attn_norm_w),
               w_.vec(ly.attn_norm_b),
               w_.vec(ly.lerp_fused),
               l * layer_floats,
               static_cast<uint32_t>(hp_.state_floats()),
               l > 0 ? 1u : 0u,
               a_.save_f,
               l > 0 ? (l - 1) * layer_floats + (N + 1) * D : 0,
               meta_seq(),
               hp_.ln_eps};
  tm.q8_mask = lerp_mask(p.first, T, InputForm::kInt8);
  tm.q8_off = a_.q_lerp;
  tm.q8_stride = token_cap_ * q8_row_floats(D);
  // The fp16 form of the lerps that tensor-core products read, from the shift itself (their
  // h16.comp dispatch and its barrier saved).
  tm.h16_mask = lerp_mask(p.first, T, InputForm::kHalf);
  tm.h16_off = a_.h_lerp;
  tm.h16_stride = token_cap_ * (D / 2);
  // (Where the shift writes no fp16 form, h16.comp makes it from the floats.)
  const uint32_t floats =
      lerp_mask(p.first, T, tm.h16_mask != 0 ? InputForm::kFloat : InputForm::kFloatOrHalf);
  tm.f32_skip = ((1u << tm.n_lerp) - 1u) & ~floats;
  return tm;
}

ShiftArgs Forward::ffn_shift(uint32_t l, uint32_t T) const {
  const uint32_t D = hp_.n_embd, N = hp_.head_size;
  const uint32_t lbase = l * (N + 2) * D;
  const Rwkv7Layer& ly = model_.layers()[l];
  const LayerPlan& p = layers_[l];
  ShiftArgs cm{D,
               1,
               a_.x,
               a_.fx,
               token_cap_ * D,
               a_.save_f,
               w_.vec(ly.attn_norm2_w),
               w_.vec(ly.attn_norm2_b),
               w_.vec(ly.ffn_lerp_k),
               lbase + (N + 1) * D,
               static_cast<uint32_t>(hp_.state_floats()),
               1,
               a_.save_a,
               lbase,
               meta_seq(),
               hp_.ln_eps};
  if (reads_q8(p.fkey, T)) {
    cm.q8_mask = 1;
    cm.q8_off = a_.q_fx;
  }
  if (p.fkey.size() == 1 && reads_h16(p.fkey, T)) {
    cm.h16_mask = 1;
    cm.h16_off = a_.h_fx;
  }
  cm.f32_skip = cm.q8_mask | cm.h16_mask;  // the ffn key product reads that form alone
  return cm;
}

Forward::~Forward() = default;

Forward::PipelineNeeds Forward::pipeline_needs(const Rwkv7Model& model, const Kernels& kernels) {
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

void Forward::prepare_pipelines(Device& dev, Pipelines& pipes, const Rwkv7Model& model) {
  Kernels kernels(dev, pipes);
  const PipelineNeeds needs = pipeline_needs(model, kernels);
  kernels.warm(needs.types, model.hparams().n_embd, model.hparams().head_size, needs.lora_ranks,
               model.head->type);
}

std::vector<std::string> Forward::kernel_choices() const {
  std::vector<std::string> out = kernels_.choices(hp_.head_size);
  if (fuse_lora_) out.push_back("lora_in_wkv");
  return out;
}

// Splits products into dispatches of one weight type, at most four each, keeping their order.
std::vector<Forward::MmGroup> Forward::group(
    const std::string& role, const std::vector<std::pair<const GgufTensor*, MmSlot>>& mats) {
  std::vector<MmGroup> out;
  std::vector<std::vector<const GgufTensor*>> tensors;
  for (const auto& [t, slot] : mats) {
    size_t gi = out.size();
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].type == t->type && out[i].slots.size() < kWeightBindings) gi = i;
    }
    if (gi == out.size()) {
      out.push_back({role + " " + weight_type_suffix(t->type), t->type, VK_NULL_HANDLE, {}});
      tensors.emplace_back();
    }
    out[gi].slots.push_back(slot);
    tensors[gi].push_back(t);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    SetBindings b;
    b.meta = {meta_.handle(), 0, VK_WHOLE_SIZE};
    b.act = {act_.handle(), 0, VK_WHOLE_SIZE};
    b.vecs = {w_.vecs().handle(), 0, VK_WHOLE_SIZE};
    b.state = {state_.handle(), 0, VK_WHOLE_SIZE};
    for (size_t j = 0; j < tensors[i].size(); ++j) b.weights[j] = w_.range(tensors[i][j]);
    out[i].set = sets_->make(b);
  }
  return out;
}

void Forward::record_mm(VkCommandBuffer cb, const std::vector<MmGroup>& groups, uint32_t T,
                        uint32_t prof) {
  for (const MmGroup& g : groups) {
    kernels_.mm(cb, g.set, g.type, g.slots, T);
    profiler_.stamp(cb, prof, g.label);
  }
}

// (Not where the product runs on tensor cores from the fp16 form instead.)
bool Forward::reads_q8(const MmGroup& g, uint32_t T) const {
  return kernels_.reads_q8(g.type, T) && !kernels_.reads_h16(g.type, g.slots, T) &&
         std::all_of(g.slots.begin(), g.slots.end(), [](auto& s) { return s.q8_off != kNoQ8; });
}

bool Forward::reads_q8(const std::vector<MmGroup>& groups, uint32_t T) const {
  return std::any_of(groups.begin(), groups.end(),
                     [&](const MmGroup& g) { return reads_q8(g, T); });
}

bool Forward::fkey_writes_q8(const LayerPlan& p, uint32_t T) const {
  return reads_q8(p.fval, T) && p.fkey.size() == 1 && reads_q8(p.fkey[0], T) &&
         kernels_.writes_q8(p.fkey[0].type, hp_.n_embd, hp_.n_ffn, T);
}

bool Forward::reads_h16(const std::vector<MmGroup>& groups, uint32_t T) const {
  return std::any_of(groups.begin(), groups.end(),
                     [&](const MmGroup& g) { return kernels_.reads_h16(g.type, g.slots, T); });
}

bool Forward::fkey_writes_h16(const LayerPlan& p, uint32_t T) const {
  return p.fkey.size() == 1 && p.fval.size() == 1 && reads_h16(p.fval, T) &&
         kernels_.writes_h16(p.fkey[0].type, p.fkey[0].slots, T);
}

void Forward::record_half(VkCommandBuffer cb, const std::vector<MmGroup>& groups, uint32_t T,
                          uint32_t prof) {
  std::vector<Kernels::HalfRegion> regions;
  for (const MmGroup& g : groups) {
    if (!kernels_.reads_h16(g.type, g.slots, T)) continue;
    for (const MmSlot& sl : g.slots) {
      const bool seen =
          std::any_of(regions.begin(), regions.end(),
                      [&](const Kernels::HalfRegion& r) { return r.h_off == sl.h16_off; });
      if (!seen) regions.push_back({sl.K, sl.x_off, sl.h16_off});
    }
  }
  if (regions.empty()) return;
  kernels_.to_half(cb, base_set_, T, regions);
  profiler_.stamp(cb, prof, "h16");
  kernels_.compute_barrier(cb);
}

uint32_t Forward::lerp_mask(const std::vector<MmGroup>& groups, uint32_t T, InputForm form) const {
  uint32_t mask = 0;
  for (const MmGroup& g : groups) {
    const bool q8 = reads_q8(g, T), h16 = kernels_.reads_h16(g.type, g.slots, T);
    const bool reads = form == InputForm::kInt8    ? q8
                       : form == InputForm::kHalf  ? h16
                       : form == InputForm::kFloat ? !q8 && !h16
                                                   : !q8;  // kFloatOrHalf
    if (!reads) continue;
    for (const MmSlot& s : g.slots) mask |= 1u << lerp_index(s);
  }
  return mask;
}

uint32_t Forward::lerp_index(const MmSlot& slot) const {
  return (slot.x_off - a_.lerp) / (token_cap_ * hp_.n_embd);
}

void Forward::collect_profile(const ForwardShape& shape, bool whole) {
  if (!profiler_.enabled()) return;
  if (auto it = recorded_.find({shape, whole}); it != recorded_.end()) {
    profiler_.collect(it->second.profile);
  }
}

const std::vector<VkCommandBuffer>& Forward::commands(const ForwardShape& shape, bool whole) {
  if (auto it = recorded_.find({shape, whole}); it != recorded_.end()) return it->second.cbs;
  if (recorded_.size() >= 64) {  // bound the cache; shapes repeat in steady decode
    for (auto& [s, r] : recorded_) {
      vkFreeCommandBuffers(dev_.device(), cmds_.pool(), static_cast<uint32_t>(r.cbs.size()),
                           r.cbs.data());
      profiler_.forget(r.profile);
    }
    recorded_.clear();
  }
  const uint32_t segments = hp_.n_layer + 2;
  Recorded r;
  r.cbs.resize(whole ? 1 : segments);
  cmds_.allocate(r.cbs);
  for (VkCommandBuffer cb : r.cbs) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    RWKVD_VK(vkBeginCommandBuffer(cb, &bi));
  }
  for (uint32_t s = 0; s < segments; ++s) {
    VkCommandBuffer cb = r.cbs[whole ? 0 : s];
    Kernels::barrier(cb);  // after the previous segment / chunk / state transfer
    r.profile.push_back(profiler_.begin(cb, shape.T));
    record(cb, s, shape, r.profile.back());
  }
  for (VkCommandBuffer cb : r.cbs) RWKVD_VK(vkEndCommandBuffer(cb));
  ++shapes_recorded_;
  return recorded_.emplace(std::pair{shape, whole}, std::move(r)).first->second.cbs;
}

void Forward::record(VkCommandBuffer cb, uint32_t segment, const ForwardShape& s, uint32_t prof) {
  const uint32_t D = hp_.n_embd, N = hp_.head_size, L = hp_.n_layer;
  const uint32_t row_floats = D, layer_floats = (N + 2) * D;
  const uint32_t slot_floats = static_cast<uint32_t>(hp_.state_floats());
  if (segment == 0) {
    EmbedArgs e{D,
                row_bytes(model_.token_embd),
                a_.x,
                w_.vec(model_.emb_norm_w),
                w_.vec(model_.emb_norm_b),
                hp_.ln_eps};
    kernels_.embed(cb, embed_set_, model_.token_embd->type, e, s.T);
    profiler_.stamp(cb, prof, "embed");
    return;
  }
  if (segment == L + 1) {
    // A few logit rows (5-16: a few sequences decoding) on tensor cores from embd's fp16 form
    // rather than on the int8 kernel (H100, Q6_K 65536 x 2560 at 8 rows: 164 against 249 us);
    // more keep reading the floats (their pipeline is made at load, Kernels::warm); a Q6_K head
    // of up to 8 rows stays on the int8 kernel (Kernels::head_on_coopmat).
    std::vector<MmGroup> head = head_;
    if (kernels_.head_on_coopmat(model_.head->type, s.n_logit)) {
      head[0].slots[0].h16_off = a_.h_embd;
    }
    // A head on the int8 kernel reads embd's int8 form, which out_ln writes where it can (the
    // logit rows are a prefix of embd), else a q8.comp dispatch.
    const bool head_q8 = s.n_logit > 0 && reads_q8(head, s.n_logit);
    const bool ln_q8 = head_q8 && kernels_.out_ln_writes_q8(D);
    OutLnArgs o{D,
                a_.x,
                a_.embd,
                w_.vec(model_.out_norm_w),
                w_.vec(model_.out_norm_b),
                s.n_out,
                s.B,
                meta_seq(),
                meta_out(),
                slot_floats,
                a_.save_f,
                (L - 1) * layer_floats + (N + 1) * row_floats,
                hp_.ln_eps,
                ln_q8 ? a_.q_embd : kNoQ8};
    kernels_.out_ln(cb, base_set_, o);
    profiler_.stamp(cb, prof, "out_ln");
    if (s.n_logit > 0) {
      kernels_.compute_barrier(cb);
      if (head_q8 && !ln_q8) {
        kernels_.quantize_q8(cb, base_set_, D, s.n_logit, a_.embd, a_.q_embd);
        profiler_.stamp(cb, prof, "q8 head");
        kernels_.compute_barrier(cb);
      }
      record_half(cb, head, s.n_logit, prof);
      record_mm(cb, head, s.n_logit, prof);
      if (s.argmax) {
        kernels_.compute_barrier(cb);
        kernels_.argmax(cb, base_set_, hp_.n_vocab, s.n_logit, a_.logits, a_.argmax);
        profiler_.stamp(cb, prof, "argmax");
      }
    }
    if (s.n_out > 0) {
      Kernels::barrier(cb);
      const VkDeviceSize logit_bytes =
          s.argmax ? VkDeviceSize{s.n_logit} * Kernels::argmax_parts(hp_.n_vocab) * 8
                   : VkDeviceSize{s.n_logit} * hp_.n_vocab * 4;
      VkBufferCopy regions[2] = {{VkDeviceSize{a_.embd} * 4, 0, VkDeviceSize{s.n_out} * D * 4},
                                 {VkDeviceSize{s.argmax ? a_.argmax : a_.logits} * 4,
                                  readback_logits_offset(), logit_bytes}};
      vkCmdCopyBuffer(cb, act_.handle(), readback_.handle(), s.n_logit > 0 ? 2 : 1, regions);
      profiler_.stamp(cb, prof, "copy out");
    }
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    return;
  }
  const uint32_t l = segment - 1;
  const Rwkv7Layer& ly = model_.layers()[l];
  const LayerPlan& p = layers_[l];
  const uint32_t lbase = l * layer_floats;
  const ShiftArgs tm = att_shift(l, s.T);
  // One token: the shifts run in front of the products that read them (their records in meta).
  if (fuse_att_shift_ && s.T == 1) {
    std::vector<MmGroup> first = p.first;
    for (size_t gi = 0; gi < first.size(); ++gi) {
      for (size_t si = 0; si < first[gi].slots.size(); ++si) {
        MmSlot& sl = first[gi].slots[si];
        // (The first product of the step does the shift's stores.)
        sl.front = {shift_record(l, false), w_.vec(ly.lerp_fused) + lerp_index(sl) * D,
                    gi == 0 && si == 0};
      }
    }
    record_mm(cb, first, s.T, prof);
  } else {
    kernels_.shift(cb, base_set_, tm, s.T);
    profiler_.stamp(cb, prof, "shift att");
    kernels_.compute_barrier(cb);
    if (tm.h16_mask == 0) record_half(cb, p.first, s.T, prof);
    record_mm(cb, p.first, s.T, prof);
  }
  kernels_.compute_barrier(cb);
  // (One sequence with F16 LoRA up weights runs them as products: H100, 2.9B F16, products /
  // inside wkv, tok/s: gen-1 301.6, 300.3 / 285.8, 285.5; gen-8 1108, 1101 / 1139, 1174.)
  // (Up to Tuning::fused_lora_max_t tokens and _b sequences: longer chunks run them as one
  // product, which is faster there, and each sequence's workgroups read the weights again.)
  const Tuning& tn = kernels_.tuning();
  const bool fuse_lora = fuse_lora_ && s.T <= tn.fused_lora_max_t && s.B <= tn.fused_lora_max_b &&
                         (s.B > 1 || p.lora_half == 0);
  if (!fuse_lora) {
    record_mm(cb, p.second, s.T, prof);
    kernels_.compute_barrier(cb);
  }
  WkvArgs wk{D,
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
             lbase,
             slot_floats,
             has_value_residual(l) ? 0u : kWkvLayer0,
             meta_seq()};
  if (fuse_lora) {
    wk.flags |= kWkvLora | p.lora_half;
    wk.hw_off = a_.hw;
    wk.ha_off = a_.ha;
    wk.hv_off = a_.hv;
    wk.hg_off = a_.hg;
    wk.rank_w = hp_.rank_w;
    wk.rank_a = hp_.rank_a;
    wk.rank_v = hp_.rank_v;
    wk.rank_g = hp_.rank_g;
  }
  if (reads_q8(p.out, s.T)) wk.y_q8 = a_.q_y;
  // The output product reads y's fp16 form alone (on tensor cores): wkv writes just that, and no
  // h16.comp dispatch and barrier make it (H100, 2.9B Q4_K_M: 4.5 us a layer at 8 tokens).
  const bool y_half = reads_h16(p.out, s.T) && kernels_.wkv_writes_h16(N, s.T);
  if (y_half) {
    wk.flags |= kWkvYHalf;
    wk.y_q8 = a_.h_y;
  }
  kernels_.wkv(cb, fuse_lora ? p.lora_set : base_set_, wk, hp_.n_head, N, s.B, s.T);
  profiler_.stamp(cb, prof, "wkv");
  kernels_.compute_barrier(cb);
  if (!y_half) record_half(cb, p.out, s.T, prof);
  record_mm(cb, p.out, s.T, prof);
  kernels_.compute_barrier(cb);
  const ShiftArgs cm = ffn_shift(l, s.T);
  // One token: the ffn key product runs the shift in front (its record in meta).
  const bool ffn_in_front = fuse_ffn_shift_ && s.T == 1;
  if (!ffn_in_front) {
    kernels_.shift(cb, base_set_, cm, s.T);
    profiler_.stamp(cb, prof, "shift ffn");
    kernels_.compute_barrier(cb);
  }
  const bool fkey_h16 = cm.h16_mask != 0;
  if (!fkey_h16) record_half(cb, p.fkey, s.T, prof);
  // The ffn value product's int8 or fp16 input: written by the ffn key product where it can,
  // else by a dispatch of its own.
  const bool fkey_h16_out = fkey_writes_h16(p, s.T);
  if (fkey_writes_q8(p, s.T) || fkey_h16_out) {
    std::vector<MmGroup> fkey = p.fkey;
    if (fkey_h16_out) {
      fkey[0].slots[0].yh_off = a_.h_fh;
      fkey[0].slots[0].y_half_only = true;  // the ffn value product reads fh in fp16 alone
    } else {
      fkey[0].slots[0].yq_off = a_.q_fh;
      if (ffn_in_front)
        fkey[0].slots[0].front = {shift_record(l, true), w_.vec(ly.ffn_lerp_k), true};
    }
    record_mm(cb, fkey, s.T, prof);
  } else {
    record_mm(cb, p.fkey, s.T, prof);
  }
  kernels_.compute_barrier(cb);
  if (reads_q8(p.fval, s.T) && !fkey_writes_q8(p, s.T)) {
    kernels_.quantize_q8(cb, base_set_, hp_.n_ffn, s.T, a_.fh, a_.q_fh);
    profiler_.stamp(cb, prof, "q8 ffn");
    kernels_.compute_barrier(cb);
  }
  if (!fkey_h16_out) record_half(cb, p.fval, s.T, prof);
  record_mm(cb, p.fval, s.T, prof);
}

}  // namespace rwkvd::engine::vk
