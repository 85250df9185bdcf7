#include "engine/convert/convert.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/convert/emit.h"
#include "engine/convert/rwkv7_metadata.h"
#include "engine/convert/rwkvcpp_bin.h"
#include "engine/convert/safetensors.h"
#include "engine/convert/type_policy.h"
#include "engine/convert/vocab.h"
#include "engine/error.h"
#include "engine/gguf_writer.h"
#include "engine/vocab_file.h"

namespace rwkvd::engine::convert {
namespace {

constexpr const char* kWorldVocabName = "rwkv_vocab_v20230424.txt";

std::vector<std::byte> first_bytes(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EngineError(path + ": cannot open: " + std::strerror(errno));
  std::vector<std::byte> head(n);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// "auto": F16 when the checkpoint's matrices are 16-bit (F16, or BF16 as llama.cpp's converter
// defaults to), else F32.
QuantFtype resolve_type(const std::string& type, const Rwkv7Plan& plan) {
  if (type == "auto") {
    for (const auto& t : plan.tensors) {
      for (const auto* in : t.inputs) {
        if (t.ne.size() >= 2 && in->dtype != SourceDtype::F32) return QuantFtype::F16;
      }
    }
    return QuantFtype::F32;
  }
  if (const auto parsed = parse_file_type(type)) return *parsed;
  throw EngineError("convert: unknown --type " + type +
                    " (auto, f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k)");
}

GgufVocab resolve_vocab(const ConvertOptions& o, int64_t n_vocab, std::string& used) {
  std::string path = o.vocab.empty() ? vocab_beside(o.input) : o.vocab;
  if (path.empty()) {
    if (n_vocab != 256) {
      throw EngineError(o.input + ": the model has " + std::to_string(n_vocab) +
                        " tokens and no vocab file was given: pass --vocab " + kWorldVocabName);
    }
    used = "byte";
    return byte_vocab(n_vocab);
  }
  used = path;
  return world_vocab(read_vocab_file(path), n_vocab, path);
}

bool iends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<ptrdiff_t>(suffix.size()),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

}  // namespace

SourceModel open_checkpoint(const std::string& path) {
  const auto head = first_bytes(path, 16);
  if (looks_like_rwkvcpp_bin(head)) return read_rwkvcpp_bin(path);
  if (looks_like_safetensors(head)) return read_safetensors(path);
  if (head.size() >= 4 && std::memcmp(head.data(), "PK\x03\x04", 4) == 0) {
    throw EngineError(path + ": a zip (a PyTorch .pth?): `rwkvd convert` reads it through " +
                      "tools/pth_to_st.py");
  }
  if (head.size() >= 4 && std::memcmp(head.data(), "GGUF", 4) == 0) {
    throw EngineError(path + ": already a GGUF file");
  }
  throw EngineError(path + ": not a recognised checkpoint (rwkv.cpp .bin, SafeTensors .st or " +
                    "PyTorch .pth)");
}

std::string default_model_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  for (const char* tag : {"fp32", "fp16", "bf16", "f32", "f16"}) {
    for (const char sep : {'-', '_', '.'}) {
      const std::string suffix = std::string(1, sep) + tag;
      if (iends_with(stem, suffix) && stem.size() > suffix.size()) {
        return stem.substr(0, stem.size() - suffix.size());
      }
    }
  }
  return stem;
}

std::string vocab_beside(const std::string& path) {
  const auto candidate = std::filesystem::path(path).parent_path() / kWorldVocabName;
  std::error_code ec;
  return std::filesystem::is_regular_file(candidate, ec) ? candidate.string() : std::string();
}

ConvertSummary convert_to_gguf(const ConvertOptions& o, const ConvertProgress& progress) {
  const SourceModel src = open_checkpoint(o.input);
  const Rwkv7Plan plan = plan_rwkv7(src, o.lora_layout);
  ConvertSummary s;
  s.format = src.format;
  s.dims = plan.dims;
  s.file_type = resolve_type(o.type, plan);
  s.n_tensors = plan.tensors.size();
  const GgufVocab vocab = resolve_vocab(o, plan.dims.n_vocab, s.vocab);

  GgufWriter w(o.output);
  add_rwkv7_metadata(w, plan.dims, o.name.empty() ? default_model_name(o.input) : o.name,
                     s.file_type, vocab);
  std::vector<GgmlType> types;  // checked against the blocks before anything is written
  for (const auto& t : plan.tensors) {
    types.push_back(tensor_type(t, s.file_type));
    w.add_tensor(t.name, t.ne, types.back());
  }
  w.write_header();
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& t = plan.tensors[i];
    w.begin_tensor(t.name);
    emit_tensor(t, types[i], [&](std::span<const std::byte> b) { w.write(b); });
    w.end_tensor();
    if (progress) progress(i + 1, plan.tensors.size(), t.name);
  }
  w.finish();
  s.file_bytes = w.file_size();
  return s;
}

}  // namespace rwkvd::engine::convert
