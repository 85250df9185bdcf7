// Handing a result tensor from the worker to a client: the shared-memory ring (protocol/
// shm_ring.h) against the same tensor inline in a msgpack reply. The tensor is 5.4M floats
// (21.6 MB), the recurrent state of a 2.9B RWKV-7 model (32 x 66 x 2560).
//   build/bench/shm_bench
// ring/mapped: allocate a lease, write the tensor (the worker's copy out of the engine), resolve
//   it through a reader that mapped the ring once, read every float, release.
// ring/map_each_time: the same with a fresh read-only mapping per transfer (a new client's first
//   result: its page faults included).
// inline/encode_decode: tensor_inline + encode the reply + decode it + copy the floats out (what
//   the socket path costs besides the socket itself).
// The other way, a request's state from a client to the worker (a session opened from it):
// request/inline: the client encodes the request with the state inline, the worker decodes it
//   into the request's float vector (the socket's copies again not counted).
// request/shm_input: the client writes the state into a shared-memory input of its own
//   (protocol/shm_input.h) and encodes the request naming it, the worker decodes the request,
//   reading the object with pread, and the client removes the object.
// bytes/s = tensor bytes per second.
#include <benchmark/benchmark.h>

#include <cstring>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "protocol/codec.h"
#include "protocol/messages.h"
#include "protocol/shm_input.h"
#include "protocol/shm_ring.h"

namespace {

using rwkvd::protocol::ShmReader;
using rwkvd::protocol::ShmRing;

constexpr int64_t kLayers = 32, kRows = 66, kEmbd = 2560;
constexpr size_t kFloats = static_cast<size_t>(kLayers * kRows * kEmbd);
constexpr uint64_t kBytes = kFloats * sizeof(float);

const std::vector<float>& tensor() {
  static const std::vector<float> t = [] {
    std::vector<float> v(kFloats);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1021) * 1e-3f;
    return v;
  }();
  return t;
}

std::unique_ptr<ShmRing> make_ring() {
  ShmRing::Options o;
  o.bytes = 32u << 20;  // room for one such tensor; fits a 64 MiB /dev/shm
  o.n_slots = 8;
  return ShmRing::create(o);
}

double read_all(const float* p, size_t n) {
  return std::accumulate(p, p + n, 0.0);
}

void BM_RingTransfer(benchmark::State& state, bool map_each_time) {
  std::unique_ptr<ShmRing> ring;
  try {
    ring = make_ring();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  std::unique_ptr<ShmReader> reader = ShmReader::open(ring->name());
  const auto& src = tensor();
  for (auto _ : state) {
    auto a = ring->allocate(kBytes, "bench");
    if (!a) {
      state.SkipWithError("ring full");
      break;
    }
    std::memcpy(a->data, src.data(), kBytes);
    if (map_each_time) reader = ShmReader::open(ring->name());
    const double sum = read_all(reader->resolve(a->ref), kFloats);
    benchmark::DoNotOptimize(sum);
    ring->release(a->ref.lease, "bench");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}
BENCHMARK_CAPTURE(BM_RingTransfer, mapped, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RingTransfer, map_each_time, true)->Unit(benchmark::kMillisecond);

void BM_InlineTransfer(benchmark::State& state) {
  using rwkvd::protocol::Value;
  const auto& src = tensor();
  rwkvd::protocol::Limits limits;
  limits.max_message_bytes = 64u << 20;
  std::vector<float> out(kFloats);
  for (auto _ : state) {
    Value reply = rwkvd::protocol::ok_reply(1);
    reply.set("state",
              rwkvd::protocol::tensor_inline({kLayers, kRows, kEmbd}, src.data(), kFloats));
    const std::string bytes = rwkvd::protocol::encode(reply);
    const auto r = rwkvd::protocol::decode_reply(bytes, limits);
    const auto desc = rwkvd::protocol::parse_tensor(*r.body.find("state"));
    std::memcpy(out.data(), desc.data->data(), kBytes);
    const double sum = read_all(out.data(), kFloats);
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_InlineTransfer)->Name("inline/encode_decode")->Unit(benchmark::kMillisecond);

void BM_RequestState(benchmark::State& state, bool shm) {
  using rwkvd::protocol::Request;
  const auto& src = tensor();
  for (auto _ : state) {
    Request req;
    req.id = 1;
    req.op = rwkvd::protocol::Op::kSessionOpen;
    std::optional<rwkvd::protocol::ShmInput> input;
    if (shm) {
      input.emplace(std::as_bytes(std::span(src)));
      req.state_shm = Request::ShmInputRef{input->name(), input->bytes()};
    } else {
      req.state = src;
    }
    const std::string bytes = rwkvd::protocol::encode_request(req);
    const Request got = rwkvd::protocol::decode_request(bytes);
    benchmark::DoNotOptimize(got.state->data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}
BENCHMARK_CAPTURE(BM_RequestState, inline, false)
    ->Name("request/inline")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RequestState, shm_input, true)
    ->Name("request/shm_input")
    ->Unit(benchmark::kMillisecond);

// The worker's side alone: decoding a request whose state is a shared-memory input (the read
// out of the client's object, which the worker then unlinks), the object written untimed. Each
// thread keeps its last `kept` states, as the worker's sessions keep theirs: a state freed at once
// may come back from the allocator already faulted in, a session's does not.
void BM_RequestStateDecode(benchmark::State& state) {
  using rwkvd::protocol::Request;
  std::vector<std::vector<float>> kept(static_cast<size_t>(state.range(0)));
  size_t next = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Request req;
    req.id = 1;
    req.op = rwkvd::protocol::Op::kSessionOpen;
    const rwkvd::protocol::ShmInput input(std::as_bytes(std::span(tensor())));
    req.state_shm = Request::ShmInputRef{input.name(), input.bytes()};
    const std::string bytes = rwkvd::protocol::encode_request(req);
    if (!kept.empty()) kept[next] = {};  // frees the oldest, untimed
    state.ResumeTiming();
    Request got = rwkvd::protocol::decode_request(bytes);
    benchmark::DoNotOptimize(got.state->data());
    if (!kept.empty()) {
      kept[next] = std::move(*got.state);
      next = (next + 1) % kept.size();
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_RequestStateDecode)
    ->Name("request/shm_input_decode")
    ->ArgName("kept")
    ->Arg(0)
    ->Unit(benchmark::kMillisecond);
// Several at once, as the worker's state readers take several clients' session_open.
BENCHMARK(BM_RequestStateDecode)
    ->Name("request/shm_input_decode")
    ->ArgName("kept")
    ->Arg(0)
    ->Threads(4)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RequestStateDecode)
    ->Name("request/shm_input_decode")
    ->ArgName("kept")
    ->Arg(8)
    ->Threads(1)
    ->Threads(6)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
