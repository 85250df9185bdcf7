#include "tools/synth/encode.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "engine/quant/quantize.h"

namespace rwkvd::tools::synth {

void encode(engine::GgmlType type, const float* src, std::byte* dst, int64_t n) {
  const engine::GgmlTypeTraits& t = engine::ggml_traits(type);
  const int64_t blocks = n / t.block_elems;
  // The quantisers search scales per block, so a 2.9B model in a k-quant is CPU-bound: split
  // the blocks of a chunk over the cores (blocks are independent, the result is identical).
  // Plain float conversions are memory-bound and stay on one thread.
  const bool slow = t.block_elems > 1;
  const auto threads = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t parts = slow ? std::min<int64_t>(threads, blocks / 64) : 1;
  if (parts <= 1) {
    engine::quantize(type, src, dst, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  {
    std::vector<std::jthread> workers;
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t b0 = blocks * p / parts, b1 = blocks * (p + 1) / parts;
      workers.emplace_back([=, &errors] {
        try {
          engine::quantize(type, src + b0 * t.block_elems, dst + b0 * t.block_bytes,
                           (b1 - b0) * t.block_elems);
        } catch (...) {
          errors[static_cast<size_t>(p)] = std::current_exception();
        }
      });
    }
  }  // joined here
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace rwkvd::tools::synth
