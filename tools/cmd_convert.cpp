// `rwkvd convert IN OUT.gguf [--type auto|f32|f16] [--vocab FILE] [--name NAME]
// [--lora-layout auto|pytorch|transposed]`: an RWKV-7 checkpoint (rwkv.cpp .bin, SafeTensors
// .st, PyTorch .pth) to a GGUF in llama.cpp's layout. docs/CONVERT.md has the details.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/convert/convert.h"
#include "tools/commands.h"
#include "tools/pth_runner.h"

namespace rwkvd::tools {
namespace {

namespace cv = engine::convert;

struct ConvertArgs {
  cv::ConvertOptions options;
  std::string lora_layout = "auto";
};

// Removes the intermediate .st however the conversion ends.
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

void print_progress(size_t done, size_t total, const std::string&) {
  // A line per tenth done: enough to watch a multi-GB conversion without flooding a log.
  if (done * 10 / total > (done - 1) * 10 / total) {
    std::fprintf(stderr, "convert: %zu%%\n", done * 10 / total * 10);
  }
}

void run_convert(ConvertArgs a) {
  auto& o = a.options;
  o.lora_layout = a.lora_layout == "pytorch"      ? cv::LoraLayout::kPytorch
                  : a.lora_layout == "transposed" ? cv::LoraLayout::kTransposed
                                                  : cv::LoraLayout::kUnknown;
  TempFile st;
  const std::string original = o.input;
  if (looks_like_zip(o.input)) {
    // The name and the vocab beside the checkpoint belong to the .pth, not to the temp file.
    if (o.name.empty()) o.name = cv::default_model_name(original);
    if (o.vocab.empty()) o.vocab = cv::vocab_beside(original);
    st.path = o.output + ".pth-" + std::to_string(::getpid()) + ".st";
    std::fprintf(stderr, "convert: %s is a PyTorch checkpoint; reading it with pth_to_st.py\n",
                 original.c_str());
    run_pth_to_st(original, st.path);
    o.input = st.path;
  }
  const auto s = cv::convert_to_gguf(o, print_progress);
  const auto& d = s.dims;
  std::printf(
      "%s (%s) -> %s\n  %lld layers, D=%lld, F=%lld, vocab %lld (%s), head size %lld, LoRA ranks "
      "w/a/v/g %lld/%lld/%lld/%lld\n  %s, %zu tensors, %llu bytes\n",
      original.c_str(), s.format.c_str(), o.output.c_str(), static_cast<long long>(d.n_layer),
      static_cast<long long>(d.n_embd), static_cast<long long>(d.n_ffn),
      static_cast<long long>(d.n_vocab), s.vocab.c_str(), static_cast<long long>(d.head_size),
      static_cast<long long>(d.rank_w), static_cast<long long>(d.rank_a),
      static_cast<long long>(d.rank_v), static_cast<long long>(d.rank_g),
      std::string(engine::quant_ftype_name(s.file_type)).c_str(), s.n_tensors,
      static_cast<unsigned long long>(s.file_bytes));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "convert", "Convert an RWKV-7 checkpoint (.bin of rwkv.cpp, .st, .pth) to GGUF");
  auto a = std::make_shared<ConvertArgs>();
  auto& o = a->options;
  cmd->add_option("input", o.input, "rwkv.cpp .bin, SafeTensors .st or PyTorch .pth")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("output", o.output, "GGUF file to write")->required();
  cmd->add_option("--type", o.type,
                  "Output type: auto (f16 for a 16-bit checkpoint, else f32), f32, f16, bf16 (as "
                  "llama.cpp's converter), q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k (as "
                  "llama.cpp's quantizer)")
      ->capture_default_str();
  cmd->add_option("--vocab", o.vocab,
                  "World vocab file (rwkv_vocab_v20230424.txt); default: the one beside the "
                  "input, else a byte vocab for 256-token models")
      ->check(CLI::ExistingFile);
  cmd->add_option("--name", o.name, "general.name (default: from the input's file name)");
  cmd->add_option("--lora-layout", a->lora_layout,
                  "LoRA matrices as PyTorch stores them (pytorch) or already transposed "
                  "(transposed, as rwkv.cpp and web-rwkv do); auto decides from the shapes")
      ->check(CLI::IsMember({"auto", "pytorch", "transposed"}))
      ->capture_default_str();
  cmd->callback([a] { run_convert(*a); });
}

}  // namespace rwkvd::tools
