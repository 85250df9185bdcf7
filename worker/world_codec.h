#pragma once
// The engine's world tokenizer as the worker's TextCodec.
#include <memory>

#include "engine/gguf.h"
#include "worker/text_codec.h"

namespace rwkvd::worker {

// nullptr when the GGUF carries no usable vocabulary (text ops then answer "unsupported").
std::shared_ptr<const TextCodec> make_world_codec(const engine::GgufFile& file);

}  // namespace rwkvd::worker
