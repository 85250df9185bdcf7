#pragma once
// Test-only writers for converter inputs: rwkv.cpp .bin and SafeTensors files built from
// SourceTensors (usually the fixture's, renamed or damaged), in a per-process temp directory.
#include <unistd.h>

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

#include "engine/convert/source.h"

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

}  // namespace rwkvd::engine::convert::testing
