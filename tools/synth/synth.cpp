#include "tools/synth/synth.h"

#include <algorithm>
#include <vector>

#include "engine/gguf_writer.h"
#include "tools/synth/encode.h"
#include "tools/synth/plan.h"
#include "tools/synth/vocab.h"

namespace rwkvd::tools::synth {
namespace {

using engine::GgufMetaValue;

constexpr int64_t kChunkElems = 1 << 20;  // floats generated per step: 4 MB

std::string default_name(const SynthConfig& c) {
  return "synthetic-rwkv7-L" + std::to_string(c.layers) + "-D" + std::to_string(c.embd) + "-seed" +
         std::to_string(c.seed);
}

void add_metadata(engine::GgufWriter& w, const SynthConfig& c) {
  const LoraRanks r = c.ranks();
  w.add_string("general.architecture", "rwkv7");
  w.add_string("general.name", c.name.empty() ? default_name(c) : c.name);
  w.add_u32("rwkv7.context_length", 1048576);  // a placeholder: RWKV has no context limit
  w.add_u32("rwkv7.embedding_length", c.embd);
  w.add_u32("rwkv7.block_count", c.layers);
  w.add_f32("rwkv7.attention.layer_norm_epsilon", 1e-5f);
  w.add_u32("rwkv7.wkv.head_size", c.head_size);
  w.add_u32("rwkv7.attention.decay_lora_rank", r.w);
  w.add_u32("rwkv7.attention.iclr_lora_rank", r.a);
  w.add_u32("rwkv7.attention.value_residual_mix_lora_rank", r.v);
  w.add_u32("rwkv7.attention.gate_lora_rank", r.g);
  w.add_u32("rwkv7.feed_forward_length", c.n_ffn());
  w.add_u32("general.file_type", llama_ftype(c.type));
  if (is_quantized(c.type)) w.add_u32("general.quantization_version", 2);
  w.add_u32("rwkv7.attention.head_count", 0);  // unused, but llama.cpp requires the key

  const Vocab v = make_vocab(c.vocab, c.vocab_file);
  w.add_string("tokenizer.ggml.model", "rwkv");
  w.add("tokenizer.ggml.tokens", GgufMetaValue::strings(v.tokens));
  w.add("tokenizer.ggml.token_type", GgufMetaValue::array<int32_t>(v.types));
  if (v.world) {
    w.add_string("tokenizer.chat_template", "rwkv-world");
    if (c.vocab > 261) w.add_u32("tokenizer.ggml.eot_token_id", 261);  // "\n\n"
  }
}

}  // namespace

void synthesize(const SynthConfig& cfg, const std::string& out_path, const Progress& progress) {
  cfg.validate();
  const std::vector<PlannedTensor> plan = plan_tensors(cfg);
  engine::GgufWriter w(out_path);
  add_metadata(w, cfg);
  for (const PlannedTensor& t : plan) w.add_tensor(t.name, t.ne, t.type);
  w.write_header();

  std::vector<float> values;
  std::vector<std::byte> bytes;
  for (const PlannedTensor& t : plan) {
    const int64_t row = t.ne[0];
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    // Whole rows per chunk: quantizers work on rows.
    const int64_t chunk = std::max<int64_t>(1, kChunkElems / row) * row;
    w.begin_tensor(t.name);
    if (cfg.zeros) {
      w.write_zeros(*engine::ggml_row_bytes(t.type, static_cast<uint64_t>(n)));
      n = 0;
    }
    for (int64_t first = 0; first < n; first += chunk) {
      const int64_t m = std::min(chunk, n - first);
      values.resize(static_cast<size_t>(m));
      fill_values(t.init, cfg.seed, static_cast<uint64_t>(first), values);
      bytes.resize(*engine::ggml_row_bytes(t.type, static_cast<uint64_t>(m)));
      encode(t.type, values.data(), bytes.data(), m);
      w.write(bytes);
      if (progress) progress(w.bytes_written(), w.file_size(), t.name);
    }
    w.end_tensor();
  }
  w.finish();
}

}  // namespace rwkvd::tools::synth
