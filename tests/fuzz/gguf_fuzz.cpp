// Fuzzes the GGUF reader and the RWKV-7 model validation on arbitrary bytes, then dequantizes
// every tensor a file that passes declares: none of it may crash, leak or read out of bounds.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/quant/dequant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader maps a file, so give it one in memory.
  const int fd = memfd_create("gguf_fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    auto file = rwkvd::engine::GgufFile::open(path);
    std::vector<float> buf;
    for (const auto& t : file->tensors()) {
      if (t.n_elements() > (1 << 20)) continue;  // bounded work per input
      buf.resize(static_cast<size_t>(t.n_elements()));
      rwkvd::engine::dequantize(t.type, t.data.data(), buf.data(), t.n_elements());
    }
    for (const auto& [key, value] : file->metadata()) (void)rwkvd::engine::gguf_value_to_string(value);
    (void)rwkvd::engine::Rwkv7Model::from_gguf(std::move(file));
  } catch (const rwkvd::engine::EngineError&) {
    // Rejected with a message: the expected outcome for malformed input.
  }
  close(fd);
  return 0;
}
