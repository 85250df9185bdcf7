// Fuzzes the world tokenizer with the real vocabulary (loaded once from the fixtures'
// rwkv_vocab_v20230424.txt: $RWKVD_FIXTURES, else the path compiled in). Properties:
//  - encode of any bytes gives in-range ids, and decode(encode(x)) == x (every byte is a token);
//  - the bytes read as int32 ids decode, or throw EngineError when one is out of range, and
//    the streaming decoder gives exactly the same bytes in total.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tokenizer.h"

#ifndef RWKVD_DEFAULT_FIXTURES
#define RWKVD_DEFAULT_FIXTURES "../shared/fixtures"
#endif

namespace {

const rwkvd::engine::WorldTokenizer& tokenizer() {
  static const auto tok = [] {
    const char* env = std::getenv("RWKVD_FIXTURES");
    const std::string root = env != nullptr && *env != '\0' ? env : RWKVD_DEFAULT_FIXTURES;
    const std::string path = root + "/tokenizer/rwkv_vocab_v20230424.txt";
    try {
      return rwkvd::engine::WorldTokenizer::from_vocab_file(path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tokenizer_fuzz: cannot load %s: %s\n", path.c_str(), e.what());
      std::abort();
    }
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();  // load once, outside the timed runs
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = tokenizer();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const std::vector<int32_t> ids = tok.encode(bytes);
  for (int32_t id : ids) {
    if (id < 0 || static_cast<uint32_t>(id) >= tok.vocab_size()) std::abort();
  }
  if (tok.decode(ids) != bytes) std::abort();  // the round trip must be byte-exact

  std::vector<int32_t> raw(size / sizeof(int32_t));
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * sizeof(int32_t));
  // Keep most ids in range so decoding gets exercised past the first id.
  for (auto& id : raw) {
    if (id >= 0 && (id & 0x40000000) == 0) id %= static_cast<int32_t>(tok.vocab_size() + 4);
  }
  std::string whole;
  bool threw = false;
  try {
    whole = tok.decode(raw);
  } catch (const rwkvd::engine::EngineError&) {
    threw = true;
  }
  rwkvd::engine::StreamingDecoder stream(tok);
  std::string streamed;
  bool stream_threw = false;
  for (int32_t id : raw) {
    try {
      streamed += stream.push(id);
    } catch (const rwkvd::engine::EngineError&) {
      stream_threw = true;  // the bad id is skipped; the decoder is unchanged
    }
  }
  streamed += stream.flush();
  if (threw != stream_threw) std::abort();
  if (!threw && streamed != whole) std::abort();
  return 0;
}
