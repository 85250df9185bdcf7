// CURVE on tcp (worker/curve_auth.h): the worker makes the user's keys on first use, the user's
// own client gets in with them, and a client with any other key pair gets no answer, even one
// that knows the server's public key.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "clients/cpp/client.h"
#include "protocol/curve_keys.h"
#include "tests/worker/worker_fixture.h"
#include "worker/curve_auth.h"

namespace rwkvd::test {
namespace {

class CurveTest : public WorkerTest {
 protected:
  void SetUp() override {
    config_ = std::filesystem::temp_directory_path() / ("rwkvd-cfg-" + protocol::random_hex(4));
    std::filesystem::create_directory(config_);
    ::setenv("XDG_CONFIG_HOME", config_.c_str(), 1);
  }
  void TearDown() override {
    WorkerTest::TearDown();
    ::unsetenv("XDG_CONFIG_HOME");
    std::filesystem::remove_all(config_);
  }
  std::filesystem::path config_;
};

TEST_F(CurveTest, OnlyTheUsersOwnClientKeyGetsIn) {
  RWKVD_FIXTURE(model, kTinyWorkerModel);
  worker::ServeOptions opt;
  opt.endpoint = "tcp://127.0.0.1:*";
  start(model, opt);
  const std::string dir = protocol::curve_key_dir();
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const auto server = protocol::read_curve_pair(dir, "server");
  ASSERT_TRUE(server);
  EXPECT_EQ(connect()->hello().find("protocol")->as_uint(), 1u);  // keys picked up by itself

  // Another pair, with the server's public key: the handshake is refused, nothing answers.
  const std::filesystem::path other = config_ / "other";
  std::filesystem::create_directory(other);
  ::setenv("XDG_CONFIG_HOME", other.c_str(), 1);
  protocol::store_curve_pair(protocol::open_curve_key_dir(), "client", worker::make_curve_pair());
  EXPECT_THROW(client::Client(endpoint_, std::chrono::seconds(30), true, server->public_key),
               client::NoWorkerError);
  // No keys at all: the client says what is missing before it connects.
  std::filesystem::remove(protocol::curve_key_dir() + "/client.key");
  EXPECT_THROW(client::Client(endpoint_, std::chrono::seconds(30), true, server->public_key),
               std::runtime_error);
}

}  // namespace
}  // namespace rwkvd::test
