#include "worker/world_codec.h"

#include <spdlog/spdlog.h>

#include "engine/tokenizer.h"

namespace rwkvd::worker {
namespace {

class WorldCodec final : public TextCodec {
 public:
  explicit WorldCodec(std::unique_ptr<engine::WorldTokenizer> tok) : tok_(std::move(tok)) {}
  std::vector<int32_t> encode(std::string_view text) const override { return tok_->encode(text); }
  std::string decode(std::span<const int32_t> ids) const override { return tok_->decode(ids); }

 private:
  std::unique_ptr<engine::WorldTokenizer> tok_;
};

}  // namespace

std::shared_ptr<const TextCodec> make_world_codec(const engine::GgufFile& file) {
  try {
    return std::make_shared<WorldCodec>(engine::WorldTokenizer::from_gguf(file));
  } catch (const std::exception& e) {
    spdlog::warn("no tokenizer ({}); text requests will be refused, token ids work", e.what());
    return nullptr;
  }
}

}  // namespace rwkvd::worker
