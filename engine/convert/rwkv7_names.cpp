#include "engine/convert/rwkv7_names.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string_view>

#include "engine/error.h"

namespace rwkvd::engine::convert {
namespace {

constexpr std::array<std::string_view, 4> kTopNames{"emb.weight", "head.weight", "ln_out.weight",
                                                    "ln_out.bias"};

// Every parameter of an RWKV-7 block, after "blocks.<i>.". ln0 exists in block 0 only.
// clang-format off
constexpr std::array<std::string_view, 36> kBlockNames{
    "ln0.weight", "ln0.bias", "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias",
    "att.x_r", "att.x_w", "att.x_k", "att.x_v", "att.x_a", "att.x_g", "att.x_rwkvag",
    "att.w0", "att.w1", "att.w2", "att.a0", "att.a1", "att.a2", "att.v0", "att.v1", "att.v2",
    "att.g1", "att.g2", "att.k_k", "att.k_a", "att.r_k",
    "att.receptance.weight", "att.key.weight", "att.value.weight", "att.output.weight",
    "att.ln_x.weight", "att.ln_x.bias", "ffn.x_k", "ffn.key.weight", "ffn.value.weight"};
// clang-format on

// Parameters only older RWKV generations have; naming one makes the error say what the file is.
constexpr std::array<std::string_view, 6> kOlderNames{"att.time_mix_k", "att.time_decay",
                                                      "att.time_first", "att.time_faaaa",
                                                      "att.time_maa_x", "ffn.time_mix_k"};

constexpr std::array<std::string_view, 6> kLerps{"r", "w", "k", "v", "a", "g"};

using Block = std::map<std::string, const SourceTensor*, std::less<>>;

struct Index {
  std::map<std::string, const SourceTensor*, std::less<>> top;
  std::vector<Block> blocks;
};

template <size_t N>
bool contains(const std::array<std::string_view, N>& a, std::string_view s) {
  return std::find(a.begin(), a.end(), s) != a.end();
}

// Splits "blocks.<i>.<rest>"; false for any other name.
bool split_block_name(std::string_view name, size_t& layer, std::string_view& rest) {
  constexpr std::string_view kPrefix = "blocks.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  name.remove_prefix(kPrefix.size());
  size_t i = 0;
  size_t value = 0;
  while (i < name.size() && i < 6 && name[i] >= '0' && name[i] <= '9') {
    value = value * 10 + static_cast<size_t>(name[i] - '0');
    ++i;
  }
  if (i == 0 || i >= name.size() || name[i] != '.' || (name[0] == '0' && i > 1)) return false;
  layer = value;
  rest = name.substr(i + 1);
  return true;
}

[[noreturn]] void fail_unknown(const SourceModel& m, const std::vector<std::string>& unknown) {
  std::string msg = m.path + ": ";
  for (const auto& name : unknown) {
    size_t layer;
    std::string_view rest;
    if (split_block_name(name, layer, rest) && contains(kOlderNames, rest)) {
      throw EngineError(msg + "has " + name + ", an RWKV-4/5/6 parameter; only RWKV-7 " +
                        "checkpoints can be converted");
    }
  }
  msg += "unknown tensor name" + std::string(unknown.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < unknown.size() && i < 5; ++i) msg += (i ? ", " : "") + unknown[i];
  if (unknown.size() > 5) msg += " and " + std::to_string(unknown.size() - 5) + " more";
  throw EngineError(msg + " (not an RWKV-7 checkpoint with BlinkDL's names?)");
}

Index index_tensors(const SourceModel& m) {
  Index ix;
  std::vector<std::string> unknown;
  for (const auto& t : m.tensors) {
    size_t layer;
    std::string_view rest;
    if (contains(kTopNames, t.name)) {
      ix.top[t.name] = &t;
    } else if (split_block_name(t.name, layer, rest) && contains(kBlockNames, rest) &&
               (layer == 0 || rest.substr(0, 4) != "ln0.") && layer < 100000) {
      if (ix.blocks.size() <= layer) ix.blocks.resize(layer + 1);
      ix.blocks[layer][std::string(rest)] = &t;
    } else {
      unknown.push_back(t.name);
    }
  }
  if (!unknown.empty()) fail_unknown(m, unknown);
  if (ix.blocks.empty()) throw EngineError(m.path + ": no blocks.<i>.* tensors");
  for (size_t i = 0; i < ix.blocks.size(); ++i) {
    if (ix.blocks[i].empty()) {
      throw EngineError(m.path + ": has blocks up to " + std::to_string(ix.blocks.size() - 1) +
                        " but none of blocks." + std::to_string(i) + ".*");
    }
  }
  return ix;
}

std::vector<int64_t> squeezed(const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  for (int64_t d : shape) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

// Builds the plan tensor by tensor, checking each source shape against the dimensions.
class Planner {
 public:
  Planner(const SourceModel& m, LoraLayout layout) : m_(m), ix_(index_tensors(m)) {
    plan_.lora_layout = layout;
  }

  Rwkv7Plan run() {
    read_dims();
    auto& d = plan_.dims;
    add_matrix("token_embd.weight", top("emb.weight"), d.n_vocab, d.n_embd);
    add_vector("token_embd_norm.weight", block(0, "ln0.weight"));
    add_vector("token_embd_norm.bias", block(0, "ln0.bias"));
    for (int64_t i = 0; i < d.n_layer; ++i) add_layer(i);
    add_vector("output_norm.weight", top("ln_out.weight"));
    add_vector("output_norm.bias", top("ln_out.bias"));
    add_matrix("output.weight", top("head.weight"), d.n_vocab, d.n_embd);
    return std::move(plan_);
  }

 private:
  const SourceTensor& top(std::string_view name) const {
    auto it = ix_.top.find(name);
    if (it == ix_.top.end()) throw EngineError(m_.path + ": missing tensor " + std::string(name));
    return *it->second;
  }
  const SourceTensor* find(int64_t layer, std::string_view rest) const {
    const auto& b = ix_.blocks[static_cast<size_t>(layer)];
    auto it = b.find(rest);
    return it == b.end() ? nullptr : it->second;
  }
  const SourceTensor& block(int64_t layer, std::string_view rest) const {
    if (const auto* t = find(layer, rest)) return *t;
    throw EngineError(m_.path + ": missing tensor blocks." + std::to_string(layer) + "." +
                      std::string(rest));
  }
  [[noreturn]] void bad_shape(const SourceTensor& t, const std::string& want) const {
    throw EngineError(m_.path + ": " + t.name + " has shape " + shape_string(t.shape) +
                      ", expected " + want);
  }

  void read_dims();
  LoraLayout decide_lora_layout() const;
  int64_t lora_rank(const SourceTensor& t) const;
  void add_layer(int64_t i);

  void add(std::string name, std::vector<int64_t> ne, MapOp op,
           std::vector<const SourceTensor*> inputs) {
    plan_.tensors.push_back({std::move(name), std::move(ne), op, std::move(inputs)});
  }
  // A per-channel vector: any shape that squeezes to (D), e.g. BlinkDL's (1, 1, D).
  void add_vector(std::string name, const SourceTensor& t) {
    if (squeezed(t.shape) != std::vector<int64_t>{plan_.dims.n_embd}) {
      bad_shape(t, "[" + std::to_string(plan_.dims.n_embd) + "] (or with extra 1s)");
    }
    add(std::move(name), {plan_.dims.n_embd}, MapOp::kCopy, {&t});
  }
  // An nn.Linear-style (rows, cols) matrix, stored as is: GGUF ne = [cols, rows].
  void add_matrix(std::string name, const SourceTensor& t, int64_t rows, int64_t cols) {
    if (t.shape != std::vector<int64_t>{rows, cols}) {
      bad_shape(t, shape_string(std::vector<int64_t>{rows, cols}));
    }
    add(std::move(name), {cols, rows}, MapOp::kCopy, {&t});
  }
  // A LoRA matrix taking `in` channels to `out`: llama.cpp wants ne = [in, out], i.e. row-major
  // (out, in). PyTorch keeps (in, out) and is transposed; the transposed layout is copied.
  void add_lora(std::string name, const SourceTensor& t, int64_t in, int64_t out) {
    const bool pytorch = plan_.lora_layout == LoraLayout::kPytorch;
    const std::vector<int64_t> want =
        pytorch ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
    if (t.shape != want) {
      bad_shape(t, shape_string(want) +
                       (pytorch ? " (PyTorch LoRA layout)" : " (transposed LoRA layout)"));
    }
    add(std::move(name), {in, out}, pytorch ? MapOp::kTranspose : MapOp::kCopy, {&t});
  }

  const SourceModel& m_;
  Index ix_;
  Rwkv7Plan plan_;
};

void Planner::read_dims() {
  auto& d = plan_.dims;
  d.n_layer = static_cast<int64_t>(ix_.blocks.size());
  const auto& emb = top("emb.weight");
  if (emb.shape.size() != 2) bad_shape(emb, "[n_vocab, n_embd]");
  d.n_vocab = emb.shape[0];
  d.n_embd = emb.shape[1];
  if (d.n_vocab <= 0 || d.n_embd <= 0) bad_shape(emb, "[n_vocab, n_embd], both positive");
  const auto& ffn_key = block(0, "ffn.key.weight");
  if (ffn_key.shape.size() != 2 || ffn_key.shape[1] != d.n_embd) {
    bad_shape(ffn_key, "[n_ffn, " + std::to_string(d.n_embd) + "]");
  }
  d.n_ffn = ffn_key.shape[0];
  if (d.n_ffn <= 0) bad_shape(ffn_key, "a positive n_ffn");
  const auto& r_k = block(0, "att.r_k");
  if (r_k.shape.size() != 2 || r_k.shape[0] * r_k.shape[1] != d.n_embd) {
    bad_shape(r_k, "[n_head, head_size] with n_head * head_size = " + std::to_string(d.n_embd));
  }
  d.head_size = r_k.shape[1];
  if (plan_.lora_layout == LoraLayout::kUnknown) plan_.lora_layout = m_.lora_layout;
  if (plan_.lora_layout == LoraLayout::kUnknown) plan_.lora_layout = decide_lora_layout();
  d.rank_w = lora_rank(block(0, "att.w1"));
  d.rank_a = lora_rank(block(0, "att.a1"));
  d.rank_g = lora_rank(block(0, "att.g1"));
  // Layer 0 has no value-residual LoRA of its own; with a single layer nothing tells its rank,
  // so take llama.cpp's default for the (unused) metadata.
  d.rank_v = d.n_layer > 1 ? lora_rank(block(1, "att.v1")) : default_lora_rank(d.n_embd, 0.5, 1.3);
}

// The rank of a down-projection (w1, a1, v1, g1): its dimension other than D.
int64_t Planner::lora_rank(const SourceTensor& t) const {
  const bool pytorch = plan_.lora_layout == LoraLayout::kPytorch;
  const std::string D = std::to_string(plan_.dims.n_embd);
  if (t.shape.size() != 2 || t.shape[0] <= 0 || t.shape[1] <= 0 ||
      t.shape[pytorch ? 0 : 1] != plan_.dims.n_embd) {
    bad_shape(t, pytorch ? "[" + D + ", rank] (PyTorch LoRA layout)"
                         : "[rank, " + D + "] (transposed LoRA layout)");
  }
  return pytorch ? t.shape[1] : t.shape[0];
}

// A down-projection (x1) is (D, R) in PyTorch and (R, D) transposed; an up-projection (x2) the
// other way round. Every non-square LoRA votes; square ones (R = D) cannot tell.
LoraLayout Planner::decide_lora_layout() const {
  const int64_t D = plan_.dims.n_embd;
  const SourceTensor* pytorch = nullptr;
  const SourceTensor* transposed = nullptr;
  for (int64_t i = 0; i < plan_.dims.n_layer; ++i) {
    for (std::string_view which : {"w", "a", "v", "g"}) {
      for (int up = 0; up < 2; ++up) {
        const auto* t = find(i, "att." + std::string(which) + (up ? "2" : "1"));
        if (t == nullptr || t->shape.size() != 2 || t->shape[0] == t->shape[1]) continue;
        const int64_t d_axis = up ? 1 : 0;  // where D sits in PyTorch's shape
        if (t->shape[static_cast<size_t>(d_axis)] == D) pytorch = t;
        if (t->shape[static_cast<size_t>(1 - d_axis)] == D) transposed = t;
      }
    }
  }
  if (pytorch != nullptr && transposed != nullptr) {
    throw EngineError(m_.path + ": LoRA matrices disagree on their layout: " + pytorch->name + " " +
                      shape_string(pytorch->shape) + " is PyTorch's, " + transposed->name + " " +
                      shape_string(transposed->shape) + " is transposed");
  }
  if (pytorch != nullptr) return LoraLayout::kPytorch;
  if (transposed != nullptr) return LoraLayout::kTransposed;
  throw EngineError(m_.path + ": cannot tell the LoRA layout from the shapes (every LoRA is " +
                    "square); pass --lora-layout pytorch or transposed");
}

void Planner::add_layer(int64_t i) {
  const auto& d = plan_.dims;
  const std::string p = "blk." + std::to_string(i) + ".";
  auto b = [&](std::string_view rest) -> const SourceTensor& { return block(i, rest); };
  add_vector(p + "attn_norm.weight", b("ln1.weight"));
  add_vector(p + "attn_norm.bias", b("ln1.bias"));
  add_vector(p + "attn_norm_2.weight", b("ln2.weight"));
  add_vector(p + "attn_norm_2.bias", b("ln2.bias"));

  // The six token-shift lerps, fused as [D, 1, 1, 6] in the order r, w, k, v, a, g: either
  // already fused (rwkv.cpp's x_rwkvag, (6, 1, D)) or six (1, 1, D) vectors to concatenate.
  const std::string lerp = p + "time_mix_lerp_fused.weight";
  if (const auto* fused = find(i, "att.x_rwkvag")) {
    if (find(i, "att.x_r") != nullptr) {
      throw EngineError(m_.path + ": block " + std::to_string(i) + " has both att.x_rwkvag " +
                        "and att.x_r");
    }
    if (squeezed(fused->shape) != std::vector<int64_t>{6, d.n_embd}) {
      bad_shape(*fused, "[6, 1, " + std::to_string(d.n_embd) + "]");
    }
    add(lerp, {d.n_embd, 1, 1, 6}, MapOp::kCopy, {fused});
  } else {
    std::vector<const SourceTensor*> parts;
    for (auto x : kLerps) {
      const auto& t = b("att.x_" + std::string(x));
      if (squeezed(t.shape) != std::vector<int64_t>{d.n_embd}) {
        bad_shape(t, "[1, 1, " + std::to_string(d.n_embd) + "]");
      }
      parts.push_back(&t);
    }
    add(lerp, {d.n_embd, 1, 1, 6}, MapOp::kConcat, std::move(parts));
  }

  add_vector(p + "time_mix_w0.weight", b("att.w0"));
  add_lora(p + "time_mix_w1.weight", b("att.w1"), d.n_embd, d.rank_w);
  add_lora(p + "time_mix_w2.weight", b("att.w2"), d.rank_w, d.n_embd);
  add_vector(p + "time_mix_a0.weight", b("att.a0"));
  add_lora(p + "time_mix_a1.weight", b("att.a1"), d.n_embd, d.rank_a);
  add_lora(p + "time_mix_a2.weight", b("att.a2"), d.rank_a, d.n_embd);
  // llama.cpp needs v0/v1/v2 in layer 0 too, where the model has none (or unused dummies, which
  // its converter drops): it writes copies of a0/a1/a2 there, and so do we.
  const bool first = i == 0;
  const auto v = [&](std::string_view x) -> const SourceTensor& {
    return b(first ? "att.a" + std::string(x) : "att.v" + std::string(x));
  };
  const int64_t rank_v = first ? d.rank_a : d.rank_v;
  add_vector(p + "time_mix_v0.weight", v("0"));
  add_lora(p + "time_mix_v1.weight", v("1"), d.n_embd, rank_v);
  add_lora(p + "time_mix_v2.weight", v("2"), rank_v, d.n_embd);
  add_lora(p + "time_mix_g1.weight", b("att.g1"), d.n_embd, d.rank_g);
  add_lora(p + "time_mix_g2.weight", b("att.g2"), d.rank_g, d.n_embd);
  add_vector(p + "time_mix_k_k.weight", b("att.k_k"));
  add_vector(p + "time_mix_k_a.weight", b("att.k_a"));
  const auto& r_k = b("att.r_k");  // (H, N), flattened head-major
  if (r_k.shape != std::vector<int64_t>{d.n_embd / d.head_size, d.head_size}) {
    bad_shape(r_k, shape_string(std::vector<int64_t>{d.n_embd / d.head_size, d.head_size}));
  }
  add(p + "time_mix_r_k.weight", {d.n_embd}, MapOp::kCopy, {&r_k});
  add_matrix(p + "time_mix_receptance.weight", b("att.receptance.weight"), d.n_embd, d.n_embd);
  add_matrix(p + "time_mix_key.weight", b("att.key.weight"), d.n_embd, d.n_embd);
  add_matrix(p + "time_mix_value.weight", b("att.value.weight"), d.n_embd, d.n_embd);
  add_matrix(p + "time_mix_output.weight", b("att.output.weight"), d.n_embd, d.n_embd);
  add_vector(p + "time_mix_ln.weight", b("att.ln_x.weight"));
  add_vector(p + "time_mix_ln.bias", b("att.ln_x.bias"));
  add_vector(p + "channel_mix_lerp_k.weight", b("ffn.x_k"));
  add_matrix(p + "channel_mix_key.weight", b("ffn.key.weight"), d.n_ffn, d.n_embd);
  add_matrix(p + "channel_mix_value.weight", b("ffn.value.weight"), d.n_embd, d.n_ffn);
}

}  // namespace

int64_t MappedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

int64_t default_lora_rank(int64_t n_embd, double exponent, double multiplier) {
  const double r = std::pow(static_cast<double>(n_embd), exponent) * multiplier / 32.0;
  // Python's round() ties to even, as std::nearbyint does in the default rounding mode.
  return std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(r))) * 32;
}

Rwkv7Plan plan_rwkv7(const SourceModel& model, LoraLayout layout) {
  return Planner(model, layout).run();
}

}  // namespace rwkvd::engine::convert
