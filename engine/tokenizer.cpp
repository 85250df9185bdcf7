#include "engine/tokenizer.h"

#include <cstring>
#include <limits>

#include "engine/byte_trie.h"
#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/gguf_vocab.h"
#include "engine/vocab_file.h"

namespace rwkvd::engine {

// All token bytes live in one buffer so token_bytes() and decode() touch contiguous memory.
struct WorldTokenizer::Impl {
  std::string blob;
  std::vector<uint32_t> offsets;  // token i is blob[offsets[i], offsets[i + 1])
  ByteTrie trie;
};

WorldTokenizer::WorldTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorldTokenizer::~WorldTokenizer() = default;

std::unique_ptr<WorldTokenizer> WorldTokenizer::make(std::vector<std::string> tokens,
                                                     const std::string& source) {
  if (tokens.empty()) throw EngineError(source + ": empty vocab");
  size_t total = 0;
  for (const auto& t : tokens) total += t.size();
  if (total == 0) throw EngineError(source + ": empty vocab (no token has any bytes)");
  if (total > std::numeric_limits<uint32_t>::max()) {
    throw EngineError(source + ": token bytes exceed 4 GiB");
  }
  std::vector<std::string_view> views(tokens.begin(), tokens.end());
  ByteTrie trie(views, source);  // validates the vocab before anything else is built

  std::string blob;
  blob.reserve(total);
  std::vector<uint32_t> offsets;
  offsets.reserve(tokens.size() + 1);
  for (const auto& t : tokens) {
    offsets.push_back(static_cast<uint32_t>(blob.size()));
    blob += t;
  }
  offsets.push_back(static_cast<uint32_t>(blob.size()));
  auto impl = std::make_unique<Impl>(Impl{std::move(blob), std::move(offsets), std::move(trie)});
  return std::unique_ptr<WorldTokenizer>(new WorldTokenizer(std::move(impl)));
}

std::unique_ptr<WorldTokenizer> WorldTokenizer::from_gguf(const GgufFile& file) {
  return make(read_gguf_vocab(file), file.path());
}

std::unique_ptr<WorldTokenizer> WorldTokenizer::from_vocab_file(const std::string& path) {
  return make(read_vocab_file(path), path);
}

std::unique_ptr<WorldTokenizer> WorldTokenizer::from_token_bytes(std::vector<std::string> tokens) {
  return make(std::move(tokens), "token list");
}

std::vector<int32_t> WorldTokenizer::encode(std::string_view bytes) const {
  std::vector<int32_t> ids;
  // At most one id per byte: one allocation, never a regrowth.
  ids.reserve(bytes.size());
  impl_->trie.encode(bytes, ids);
  return ids;
}

void WorldTokenizer::encode_into(std::string_view bytes, std::vector<int32_t>& out) const {
  impl_->trie.encode(bytes, out);
}

uint32_t WorldTokenizer::vocab_size() const {
  return static_cast<uint32_t>(impl_->offsets.size() - 1);
}

namespace {
[[noreturn]] void out_of_range(int32_t id, uint32_t vocab_size) {
  throw EngineError("token id " + std::to_string(id) + " is out of range (vocab has " +
                    std::to_string(vocab_size) + " ids)");
}
}  // namespace

std::string_view WorldTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<uint32_t>(id) >= vocab_size()) out_of_range(id, vocab_size());
  const auto i = static_cast<size_t>(id);
  return {impl_->blob.data() + impl_->offsets[i], impl_->offsets[i + 1] - impl_->offsets[i]};
}

std::string WorldTokenizer::decode(std::span<const int32_t> ids) const {
  const uint32_t* off = impl_->offsets.data();
  const uint32_t n = vocab_size();
  size_t total = 0;
  for (int32_t id : ids) {  // validates every id before writing anything
    if (id < 0 || static_cast<uint32_t>(id) >= n) out_of_range(id, n);
    total += off[id + 1] - off[id];
  }
  std::string out(total, '\0');
  char* w = out.data();
  for (int32_t id : ids) {
    const uint32_t len = off[id + 1] - off[id];
    std::memcpy(w, impl_->blob.data() + off[id], len);
    w += len;
  }
  return out;
}

}  // namespace rwkvd::engine
