#pragma once
// Test-only converter inputs: rwkv.cpp .bin and SafeTensors files built from SourceTensors
// (usually a fixture GGUF's, mapped back to BlinkDL's names, renamed or damaged), written to a
// per-process temp directory.
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/convert/emit.h"
#include "engine/convert/source.h"
#include "engine/gguf.h"

namespace rwkvd::engine::convert::testing {

// Tensors with their own storage (SourceTensor only views bytes).
struct OwnedTensors {
  std::list<std::vector<std::byte>> storage;
  std::vector<SourceTensor> tensors;

  void add(std::string name, std::vector<int64_t> shape, SourceDtype dtype,
           std::vector<std::byte> bytes) {
    storage.push_back(std::move(bytes));
    tensors.push_back({std::move(name), std::move(shape), dtype, storage.back()});
  }
  // Zero-filled F32.
  void zeros(std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    add(std::move(name), std::move(shape), SourceDtype::F32,
        std::vector<std::byte>(static_cast<size_t>(n) * 4));
  }
};

// An all-zero RWKV-7 checkpoint under BlinkDL's names with every LoRA of rank `rank`, in
// PyTorch's layout (w1 is (D, rank)).
inline OwnedTensors synthetic_blinkdl(int64_t D, int64_t n_layer, int64_t V, int64_t F,
                                      int64_t head_size, int64_t rank) {
  OwnedTensors o;
  o.zeros("emb.weight", {V, D});
  o.zeros("blocks.0.ln0.weight", {D});
  o.zeros("blocks.0.ln0.bias", {D});
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    for (const char* n :
         {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "att.ln_x.weight", "att.ln_x.bias"}) {
      o.zeros(b + n, {D});
    }
    for (const char* n : {"att.x_r", "att.x_w", "att.x_k", "att.x_v", "att.x_a", "att.x_g",
                          "att.w0", "att.a0", "att.k_k", "att.k_a", "ffn.x_k"}) {
      o.zeros(b + n, {1, 1, D});
    }
    for (std::string l : {"w", "a", "v", "g"}) {
      if (l == "v" && i == 0) continue;
      if (l == "v") o.zeros(b + "att.v0", {1, 1, D});
      o.zeros(b + "att." + l + "1", {D, rank});
      o.zeros(b + "att." + l + "2", {rank, D});
    }
    o.zeros(b + "att.r_k", {D / head_size, head_size});
    for (const char* n :
         {"att.receptance.weight", "att.key.weight", "att.value.weight", "att.output.weight"}) {
      o.zeros(b + n, {D, D});
    }
    o.zeros(b + "ffn.key.weight", {F, D});
    o.zeros(b + "ffn.value.weight", {D, F});
  }
  o.zeros("ln_out.weight", {D});
  o.zeros("ln_out.bias", {D});
  o.zeros("head.weight", {V, D});
  return o;
}

inline std::filesystem::path temp_path(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("rwkvd-convert-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir / name;
}

inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

inline void put_i32(std::vector<std::byte>& out, int32_t v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + 4);
}

// An rwkv.cpp file: header, then each tensor with its shape reversed, as rwkv.cpp writes it.
inline std::vector<std::byte> rwkvcpp_bin_bytes(const std::vector<SourceTensor>& tensors,
                                                int32_t n_vocab, int32_t n_embed, int32_t n_layer) {
  std::vector<std::byte> out;
  for (int32_t v : {int32_t{0x67676d66}, int32_t{101}, n_vocab, n_embed, n_layer, int32_t{0}}) {
    put_i32(out, v);
  }
  for (const auto& t : tensors) {
    put_i32(out, static_cast<int32_t>(t.shape.size()));
    put_i32(out, static_cast<int32_t>(t.name.size()));
    put_i32(out, t.dtype == SourceDtype::F32 ? 0 : 1);
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d)
      put_i32(out, static_cast<int32_t>(*d));
    const auto* name = reinterpret_cast<const std::byte*>(t.name.data());
    out.insert(out.end(), name, name + t.name.size());
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  return out;
}

// A SafeTensors file: JSON header (keys in the given order) and the data back to back.
inline std::vector<std::byte> safetensors_bytes(
    const std::vector<SourceTensor>& tensors, const std::map<std::string, std::string>& meta = {}) {
  nlohmann::ordered_json header;
  if (!meta.empty()) header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", std::string(source_dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';  // the reference writer pads the header to 8
  size_t total = 8 + text.size();
  for (const auto& t : tensors) total += t.data.size();
  std::vector<std::byte> out(total);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t at = 8 + text.size();
  for (const auto& t : tensors) {
    if (!t.data.empty()) std::memcpy(out.data() + at, t.data.data(), t.data.size());
    at += t.data.size();
  }
  return out;
}

inline std::vector<float> floats_of(std::span<const std::byte> b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), b.size());
  return f;
}

// float32 -> bfloat16, round to nearest even (finite values only, as the fixture has).
inline uint16_t bf16_of(float f) {
  const auto bits = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline std::vector<std::byte> encode(const std::vector<float>& f, SourceDtype dtype) {
  if (dtype == SourceDtype::F32) {
    std::vector<std::byte> out(f.size() * 4);
    std::memcpy(out.data(), f.data(), out.size());
    return out;
  }
  std::vector<uint16_t> h(f.size());
  if (dtype == SourceDtype::BF16) {
    for (size_t i = 0; i < f.size(); ++i) h[i] = bf16_of(f[i]);
  } else {
    // F16 through the converter's own rounding, checked against numpy's by convert_test.
    const SourceTensor src{"",
                           {static_cast<int64_t>(f.size())},
                           SourceDtype::F32,
                           std::as_bytes(std::span<const float>(f))};
    const MappedTensor t{"", {static_cast<int64_t>(f.size())}, MapOp::kCopy, {&src}};
    size_t at = 0;
    emit_tensor(t, GgmlType::F16, [&](std::span<const std::byte> b) {
      std::memcpy(reinterpret_cast<std::byte*>(h.data()) + at, b.data(), b.size());
      at += b.size();
    });
  }
  std::vector<std::byte> out(h.size() * 2);
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

inline std::vector<float> transpose(const std::vector<float>& f, int64_t rows, int64_t cols) {
  std::vector<float> out(f.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = f[static_cast<size_t>(r * cols + c)];
  }
  return out;
}

// The fixture GGUF's tensors under BlinkDL's names and shapes: the inverse of the mapping.
// `pytorch` keeps LoRAs as BlinkDL's model does, (in, out); otherwise as web-rwkv writes them.
inline OwnedTensors blinkdl_from_gguf(const GgufFile& g, bool pytorch, SourceDtype dtype) {
  OwnedTensors out;
  const int64_t D = g.tensor("token_embd.weight").ne[0];
  const int64_t n_layer = g.get_u32("rwkv7.block_count");
  auto put = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> f) {
    out.add(name, std::move(shape), dtype, encode(f, dtype));
  };
  auto vec = [&](const std::string& gguf) { return floats_of(g.tensor(gguf).data); };
  auto mat = [&](const std::string& name, const std::string& gguf) {
    const auto& t = g.tensor(gguf);
    put(name, {t.ne[1], t.ne[0]}, floats_of(t.data));
  };
  auto lora = [&](const std::string& name, const std::string& gguf) {
    const auto& t = g.tensor(gguf);  // ne [in, out]: row-major (out, in)
    if (pytorch) {
      put(name, {t.ne[0], t.ne[1]}, transpose(floats_of(t.data), t.ne[1], t.ne[0]));
    } else {
      put(name, {t.ne[1], t.ne[0]}, floats_of(t.data));
    }
  };
  mat("emb.weight", "token_embd.weight");
  put("blocks.0.ln0.weight", {D}, vec("token_embd_norm.weight"));
  put("blocks.0.ln0.bias", {D}, vec("token_embd_norm.bias"));
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    const std::string p = "blk." + std::to_string(i) + ".";
    put(b + "ln1.weight", {D}, vec(p + "attn_norm.weight"));
    put(b + "ln1.bias", {D}, vec(p + "attn_norm.bias"));
    put(b + "ln2.weight", {D}, vec(p + "attn_norm_2.weight"));
    put(b + "ln2.bias", {D}, vec(p + "attn_norm_2.bias"));
    const auto lerp = vec(p + "time_mix_lerp_fused.weight");
    const char* xs[] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};
    for (size_t j = 0; j < 6; ++j) {
      put(b + "att." + xs[j], {1, 1, D},
          std::vector<float>(lerp.begin() + static_cast<ptrdiff_t>(j * D),
                             lerp.begin() + static_cast<ptrdiff_t>((j + 1) * D)));
    }
    for (std::string v : {"w", "a", "v", "g"}) {
      if (v == "v" && i == 0) continue;  // layer 0 has no value-residual LoRA
      if (v != "g") put(b + "att." + v + "0", {1, 1, D}, vec(p + "time_mix_" + v + "0.weight"));
      lora(b + "att." + v + "1", p + "time_mix_" + v + "1.weight");
      lora(b + "att." + v + "2", p + "time_mix_" + v + "2.weight");
    }
    put(b + "att.k_k", {1, 1, D}, vec(p + "time_mix_k_k.weight"));
    put(b + "att.k_a", {1, 1, D}, vec(p + "time_mix_k_a.weight"));
    const int64_t N = g.get_u32("rwkv7.wkv.head_size");
    put(b + "att.r_k", {D / N, N}, vec(p + "time_mix_r_k.weight"));
    for (std::string m : {"receptance", "key", "value", "output"}) {
      mat(b + "att." + m + ".weight", p + "time_mix_" + m + ".weight");
    }
    put(b + "att.ln_x.weight", {D}, vec(p + "time_mix_ln.weight"));
    put(b + "att.ln_x.bias", {D}, vec(p + "time_mix_ln.bias"));
    put(b + "ffn.x_k", {1, 1, D}, vec(p + "channel_mix_lerp_k.weight"));
    mat(b + "ffn.key.weight", p + "channel_mix_key.weight");
    mat(b + "ffn.value.weight", p + "channel_mix_value.weight");
  }
  put("ln_out.weight", {D}, vec("output_norm.weight"));
  put("ln_out.bias", {D}, vec("output_norm.bias"));
  mat("head.weight", "output.weight");
  return out;
}

}  // namespace rwkvd::engine::convert::testing
