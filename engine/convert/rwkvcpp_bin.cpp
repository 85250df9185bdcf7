#include "engine/convert/rwkvcpp_bin.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "engine/error.h"

namespace rwkvd::engine::convert {
namespace {

// Longest key and most dimensions we accept; rwkv.cpp's own keys are ~30 bytes and 3-D at most.
constexpr int32_t kMaxKeyLength = 1024;
constexpr int32_t kMaxDims = 4;

// Bounds-checked little-endian cursor over the mapping; every failure names the file.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }
  size_t left() const { return bytes_.size() - pos_; }

  int32_t i32(const std::string& what) {
    int32_t v;
    std::memcpy(&v, take(4, what).data(), 4);
    return v;
  }
  std::span<const std::byte> take(size_t n, const std::string& what) {
    if (n > left()) {
      throw EngineError(path_ + ": truncated: " + what + " needs " + std::to_string(n) +
                        " bytes at offset " + std::to_string(pos_) + " but the file ends at " +
                        std::to_string(bytes_.size()));
    }
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

SourceDtype dtype_of(int32_t data_type, const std::string& where) {
  if (data_type == 0) return SourceDtype::F32;
  if (data_type == 1) return SourceDtype::F16;
  // rwkv.cpp's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (2, 3, 7, 8, 9) and its k-quants (10..15).
  if ((data_type >= 2 && data_type <= 3) || (data_type >= 7 && data_type <= 15)) {
    throw EngineError(where + " is quantised (rwkv.cpp data type " + std::to_string(data_type) +
                      "); convert rwkv.cpp's FP16 or FP32 file instead");
  }
  throw EngineError(where + " has unknown data type " + std::to_string(data_type));
}

struct Header {
  int32_t n_vocab, n_embed, n_layer;
};

Header read_header(Cursor& c, const std::string& path) {
  const auto magic = static_cast<uint32_t>(c.i32("the header"));
  if (magic != kRwkvCppMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    throw EngineError(path + ": not an rwkv.cpp model file (magic " + hex +
                      ", expected 0x67676d66, \"fmgg\" on disk)");
  }
  const int32_t version = c.i32("the header");
  if (version != 100 && version != 101) {
    throw EngineError(path + ": unsupported rwkv.cpp file version " + std::to_string(version) +
                      " (expected 100 or 101)");
  }
  Header h{c.i32("the header"), c.i32("the header"), c.i32("the header")};
  c.i32("the header");  // the file's main data type; each parameter carries its own
  if (h.n_vocab <= 0 || h.n_embed <= 0 || h.n_layer <= 0) {
    throw EngineError(path + ": bad header: n_vocab " + std::to_string(h.n_vocab) + ", n_embed " +
                      std::to_string(h.n_embed) + ", n_layer " + std::to_string(h.n_layer));
  }
  return h;
}

SourceTensor read_parameter(Cursor& c, const std::string& path) {
  const std::string at = path + ": parameter at offset " + std::to_string(c.pos());
  const int32_t n_dims = c.i32("a parameter header");
  const int32_t key_length = c.i32("a parameter header");
  const int32_t data_type = c.i32("a parameter header");
  if (n_dims < 1 || n_dims > kMaxDims) {
    throw EngineError(at + ": bad dimension count " + std::to_string(n_dims));
  }
  if (key_length < 1 || key_length > kMaxKeyLength) {
    throw EngineError(at + ": bad key length " + std::to_string(key_length));
  }
  SourceTensor t;
  t.shape.resize(static_cast<size_t>(n_dims));
  for (int32_t d = 0; d < n_dims; ++d) {
    // The file lists the contiguous dimension first; store PyTorch order.
    t.shape[static_cast<size_t>(n_dims - 1 - d)] = c.i32("a parameter's shape");
  }
  const auto key = c.take(static_cast<size_t>(key_length), "a parameter's key");
  t.name.assign(reinterpret_cast<const char*>(key.data()), key.size());
  const std::string where = path + ": " + t.name;
  t.dtype = dtype_of(data_type, where);
  uint64_t bytes = source_dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d <= 0) throw EngineError(where + ": bad shape " + shape_string(t.shape));
    if (bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      throw EngineError(where + ": shape " + shape_string(t.shape) + " overflows");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  if (bytes > c.left()) {
    throw EngineError(path + ": truncated: " + t.name + " " + shape_string(t.shape) + " needs " +
                      std::to_string(bytes) + " bytes at offset " + std::to_string(c.pos()) +
                      " but only " + std::to_string(c.left()) + " remain");
  }
  t.data = c.take(static_cast<size_t>(bytes), t.name);
  return t;
}

// The header repeats what the tensors say; a disagreement means a damaged or foreign file.
void check_header(const Header& h, const SourceModel& m) {
  if (const auto* emb = m.find("emb.weight")) {
    if (emb->shape.size() != 2 || emb->shape[0] != h.n_vocab || emb->shape[1] != h.n_embed) {
      throw EngineError(m.path + ": header says n_vocab " + std::to_string(h.n_vocab) +
                        ", n_embed " + std::to_string(h.n_embed) + " but emb.weight is " +
                        shape_string(emb->shape));
    }
  }
  std::set<long> blocks;
  for (const auto& t : m.tensors) {
    if (t.name.rfind("blocks.", 0) == 0)
      blocks.insert(std::strtol(t.name.c_str() + 7, nullptr, 10));
  }
  if (!blocks.empty() && static_cast<long>(blocks.size()) != h.n_layer) {
    throw EngineError(m.path + ": header says n_layer " + std::to_string(h.n_layer) +
                      " but the file has " + std::to_string(blocks.size()) + " blocks");
  }
}

}  // namespace

bool looks_like_rwkvcpp_bin(std::span<const std::byte> head) {
  if (head.size() < 4) return false;
  uint32_t magic;
  std::memcpy(&magic, head.data(), 4);
  return magic == kRwkvCppMagic;
}

SourceModel read_rwkvcpp_bin(const std::string& path) {
  SourceModel m;
  m.path = path;
  m.format = "rwkv.cpp .bin";
  m.lora_layout = LoraLayout::kTransposed;
  m.file = std::make_unique<MappedFile>(path);
  Cursor c(m.file->bytes(), path);
  const Header h = read_header(c, path);
  std::set<std::string> seen;
  while (!c.at_end()) {
    m.tensors.push_back(read_parameter(c, path));
    if (!seen.insert(m.tensors.back().name).second) {
      throw EngineError(path + ": parameter " + m.tensors.back().name + " appears twice");
    }
  }
  if (m.tensors.empty()) throw EngineError(path + ": no parameters after the header");
  check_header(h, m);
  return m;
}

}  // namespace rwkvd::engine::convert
