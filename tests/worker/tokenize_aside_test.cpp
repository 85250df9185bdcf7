// Large texts are tokenized off the thread that serves the socket, and the token limit is
// checked input by input: a huge embed neither stalls other clients' replies nor gets every one
// of its inputs tokenized before it is refused.
#include <atomic>

#include "tests/worker/worker_fixture.h"

namespace rwkvd::test {
namespace {

using protocol::ErrorCode;
using protocol::Input;

const char* const kTiny = kTinyWorkerModel;

// ByteCodec that counts its encodes and, while `hold` is set, holds those of large texts (no
// timing: the test lets go when it has seen what it waits for).
class HeldCodec : public ByteCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    encodes++;
    if (text.size() > 1000 && hold.load()) {
      holding = true;
      while (hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      holding = false;
    }
    return ByteCodec::encode(text);
  }
  mutable std::atomic<int> encodes{0};
  mutable std::atomic<bool> hold{false}, holding{false};
};

class TokenizeAsideTest : public WorkerTest {
 protected:
  // The worker on `model`, tokenizing with a HeldCodec.
  HeldCodec& start_held(const std::filesystem::path& model) {
    auto codec = std::make_shared<HeldCodec>();
    codec_ = codec;
    start(model);
    return *codec;
  }
};

TEST_F(TokenizeAsideTest, OthersAreAnsweredWhileAHugeTextIsTokenized) {
  RWKVD_FIXTURE(model, kTiny);
  HeldCodec& codec = start_held(model);
  auto big = connect();
  auto other = connect();
  codec.hold = true;
  std::thread sender([&] {
    // 200 KB of text (the tiny model's byte tokens: 200k tokens, over the limit).
    const auto code = code_of([&] { big->embed({Input{std::string(200000, 'a'), {}}}); });
    EXPECT_EQ(code, ErrorCode::kTooLarge);
  });
  ASSERT_TRUE(eventually([&] { return codec.holding.load(); }));
  // The tokenizer is held mid-text: the server thread still answers. Before, it was the one
  // tokenizing, and these waited for it (here: forever).
  EXPECT_NO_THROW(other->stats());
  EXPECT_EQ(other->tokenize("ok").size(), 2u);
  codec.hold = false;
  sender.join();
  // The same client's later requests wait behind it, in order, and are served.
  EXPECT_EQ(big->tokenize("after").size(), 5u);
}

TEST_F(TokenizeAsideTest, TheTokenLimitIsCheckedInputByInput) {
  RWKVD_FIXTURE(model, kTiny);
  HeldCodec& codec = start_held(model);
  auto c = connect();
  const int before = codec.encodes.load();
  // 40k tokens each: the second passes the 65536-token limit; the third is never tokenized.
  const std::string text(40000, 'b');
  const auto code = code_of([&] { c->embed({Input{text, {}}, Input{text, {}}, Input{text, {}}}); });
  EXPECT_EQ(code, ErrorCode::kTooLarge);
  EXPECT_EQ(codec.encodes.load() - before, 2);
}

}  // namespace
}  // namespace rwkvd::test
