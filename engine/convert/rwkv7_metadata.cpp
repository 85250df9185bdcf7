#include "engine/convert/rwkv7_metadata.h"

#include "engine/convert/type_policy.h"

namespace rwkvd::engine::convert {
namespace {

// RWKV has no context limit; llama.cpp's converter writes this placeholder.
constexpr uint32_t kContextLength = 1048576;
// BlinkDL's models use LayerNorm eps 1e-5 throughout; the checkpoints do not record it.
constexpr float kLayerNormEps = 1e-5f;
// The world vocab's "\n\n", which llama.cpp's converter makes the end-of-turn token.
constexpr uint32_t kWorldEotToken = 261;
// ggml's GGML_QNT_VERSION: the block layouts engine/quant writes.
constexpr uint32_t kQuantizationVersion = 2;

}  // namespace

void add_rwkv7_metadata(GgufWriter& w, const Rwkv7Dims& d, const std::string& name,
                        QuantFtype file_type, const GgufVocab& vocab) {
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.add_string("general.architecture", "rwkv7");
  w.add_string("general.name", name);
  w.add_u32("rwkv7.context_length", kContextLength);
  w.add_u32("rwkv7.embedding_length", u32(d.n_embd));
  w.add_u32("rwkv7.block_count", u32(d.n_layer));
  w.add_f32("rwkv7.attention.layer_norm_epsilon", kLayerNormEps);
  w.add_u32("rwkv7.wkv.head_size", u32(d.head_size));
  w.add_u32("rwkv7.attention.decay_lora_rank", u32(d.rank_w));
  w.add_u32("rwkv7.attention.iclr_lora_rank", u32(d.rank_a));
  w.add_u32("rwkv7.attention.value_residual_mix_lora_rank", u32(d.rank_v));
  w.add_u32("rwkv7.attention.gate_lora_rank", u32(d.rank_g));
  w.add_u32("rwkv7.feed_forward_length", u32(d.n_ffn));
  w.add_u32("general.file_type", static_cast<uint32_t>(file_type));
  if (is_quantised(file_type)) w.add_u32("general.quantization_version", kQuantizationVersion);
  w.add_u32("rwkv7.attention.head_count", 0);  // unused, but llama.cpp requires the key
  w.add_string("tokenizer.ggml.model", "rwkv");
  w.add("tokenizer.ggml.tokens", GgufMetaValue::strings(vocab.tokens));
  w.add("tokenizer.ggml.token_type", GgufMetaValue::array<int32_t>(vocab.types));
  if (vocab.world) {
    w.add_string("tokenizer.chat_template", "rwkv-world");
    if (static_cast<int64_t>(vocab.tokens.size()) > kWorldEotToken) {
      w.add_u32("tokenizer.ggml.eot_token_id", kWorldEotToken);
    }
  }
}

}  // namespace rwkvd::engine::convert
