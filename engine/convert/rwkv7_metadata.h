#pragma once
// The GGUF metadata of an RWKV-7 model, keys and order as llama.cpp's converter writes them
// (fixtures README, "Metadata"): general.*, rwkv7.* hyper-parameters, then the tokenizer.
#include <string>

#include "engine/convert/rwkv7_names.h"
#include "engine/convert/vocab.h"
#include "engine/gguf_writer.h"
#include "engine/quant/type_policy.h"

namespace rwkvd::engine::convert {

void add_rwkv7_metadata(GgufWriter& w, const Rwkv7Dims& dims, const std::string& name,
                        QuantFtype file_type, const GgufVocab& vocab);

}  // namespace rwkvd::engine::convert
