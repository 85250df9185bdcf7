// Outputs that are not finite never become tokens: a forward whose outputs hold NaN or infinity
// answers an error naming the cause (a client's state: bad_state; the worker's own: internal,
// the weights), and a state too large to square (2^64 or more) is refused before it runs.
#include <cmath>

#include "tests/worker/faulty_backend.h"
#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::ErrorCode;
using protocol::Input;

const char* const kTiny = kTinyWorkerModel;

// The error `fn` fails with (code and message); a test failure where it does not fail.
template <typename F>
std::pair<ErrorCode, std::string> error_of(F&& fn) {
  try {
    fn();
  } catch (const client::WorkerError& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "no error";
  return {ErrorCode::kInternal, ""};
}

bool names(const std::string& message, const char* what) {
  return message.find(what) != std::string::npos;
}

TEST_F(WorkerTest, AStateThatOverflowsAnswersAnErrorNotTokens) {
  RWKVD_FIXTURE(model, kTiny);
  start(model);
  auto c = connect();
  // Finite and accepted (below 2^64), but the engine's products of it overflow: before, these
  // answered ok with tokens [0, 0, ...] picked from NaN logits.
  const std::vector<float> state(ref_->hparams().state_floats(), 1e18f);
  for (const float temperature : {0.0f, 1.0f}) {  // the engine's argmax, the sampler's logits
    SCOPED_TRACE(temperature);
    client::GenerateOptions o;
    o.state = state;
    o.sampling.temperature = temperature;
    o.sampling.max_tokens = 4;
    const auto [code, msg] = error_of([&] { c->generate(Input{"hello", {}}, o); });
    EXPECT_EQ(code, ErrorCode::kBadState);
    EXPECT_TRUE(names(msg, "not finite") && names(msg, "state this request gave")) << msg;
  }
  client::ForwardOptions f;
  f.state = state;
  EXPECT_EQ(error_of([&] { c->forward(Input{"hello", {}}, f); }).first, ErrorCode::kBadState);
  // A session opened from it: its feed has no output, its generate does.
  const uint64_t s = c->session_open(state);
  c->session_feed(s, Input{"more", {}});
  client::GenerateOptions o;
  o.sampling.max_tokens = 4;
  EXPECT_EQ(error_of([&] { c->generate(Input{"x", {}}, o, {}, s); }).first, ErrorCode::kBadState);
  EXPECT_EQ(error_of([&] { c->session_embed(s, Input{"x", {}}); }).first, ErrorCode::kBadState);
  // The worker serves on, with sound results for sound requests.
  o.sampling.temperature = 0;
  EXPECT_EQ(c->generate(Input{"hello", {}}, o).tokens.size(), 4u);
}

TEST_F(WorkerTest, AHugeFiniteStateIsRefused) {
  RWKVD_FIXTURE(model, kTiny);
  start(model);
  auto c = connect();
  std::vector<float> state(ref_->hparams().state_floats(), 0.0f);
  state[7] = 3e38f;  // finite; its square is not
  client::GenerateOptions o;
  o.state = state;
  const auto [code, msg] = error_of([&] { c->generate(Input{"hello", {}}, o); });
  EXPECT_EQ(code, ErrorCode::kBadState);
  EXPECT_TRUE(names(msg, "huge")) << msg;
  EXPECT_EQ(code_of([&] { c->session_open(state); }), ErrorCode::kBadState);
  state[7] = -1.9e19f;  // just past 2^64
  EXPECT_EQ(code_of([&] { c->session_open(state); }), ErrorCode::kBadState);
  state[7] = 1.8e19f;  // just below
  EXPECT_NO_THROW(c->session_close(c->session_open(state)));
}

TEST_F(WorkerTest, NonFiniteOutputsFromTheWorkersOwnStateNameTheWeights) {
  RWKVD_FIXTURE(model, kTiny);
  FaultyBackend* faulty = start_wrapped<FaultyBackend>(model);
  auto c = connect();
  faulty->nan_outputs = true;
  client::GenerateOptions o;
  o.sampling.temperature = 0;
  const auto [code, msg] = error_of([&] { c->generate(Input{"hello", {}}, o); });
  EXPECT_EQ(code, ErrorCode::kInternal);
  EXPECT_TRUE(names(msg, "weights")) << msg;
  EXPECT_EQ(error_of([&] {
              c->embed({Input{"a", {}}, Input{"b", {}}});
            }).first,
            ErrorCode::kInternal);
  EXPECT_EQ(error_of([&] { c->forward(Input{"hello", {}}); }).first, ErrorCode::kInternal);
  faulty->nan_outputs = false;
  EXPECT_EQ(c->generate(Input{"hello", {}}, o).tokens.size(), 16u);
}

}  // namespace
}  // namespace rwkvd::test
