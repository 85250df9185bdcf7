// The key files of protocol/curve_keys.h: created once, private, and read back as written.
#include "protocol/curve_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

namespace fs = std::filesystem;

const CurveKeyPair kA{"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID",
                      "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"};
const CurveKeyPair kB{"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
                      "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"};

class CurveKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rwkvd-keys-" + random_hex(4));
    fs::create_directory(dir_);
    ::chmod(dir_.c_str(), 0700);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text, mode_t mode) {
    std::ofstream(dir_ / name) << text;
    ::chmod((dir_ / name).c_str(), mode);
  }
  fs::path dir_;
};

TEST_F(CurveKeysTest, TheFirstPairStoredStays) {
  EXPECT_FALSE(read_curve_pair(dir_, "server"));
  const CurveKeyPair first = store_curve_pair(dir_, "server", kA);
  EXPECT_EQ(first.public_key, kA.public_key);
  const CurveKeyPair again = store_curve_pair(dir_, "server", kB);  // another process, later
  EXPECT_EQ(again.public_key, kA.public_key);
  EXPECT_EQ(again.secret_key, kA.secret_key);
  EXPECT_EQ(fs::status(dir_ / "server.key").permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(CurveKeysTest, AKeyFileOthersCanReadOrThatIsNotAPairIsRefused) {
  write("client.key", kA.public_key + "\n" + kA.secret_key + "\n", 0644);
  EXPECT_THROW(read_curve_pair(dir_, "client"), std::runtime_error);
  write("client.key", "not a key\n", 0600);
  EXPECT_THROW(read_curve_pair(dir_, "client"), std::runtime_error);
  fs::remove(dir_ / "client.key");
  fs::create_symlink(dir_ / "elsewhere.key", dir_ / "client.key");
  write("elsewhere.key", kA.public_key + "\n" + kA.secret_key + "\n", 0600);
  EXPECT_THROW(read_curve_pair(dir_, "client"), std::runtime_error);  // O_NOFOLLOW
}

TEST_F(CurveKeysTest, AuthorizedKeysSkipCommentsAndRefuseGarbage) {
  EXPECT_TRUE(read_authorized_keys(dir_).empty());
  write("authorized_keys", "# laptop\n" + kA.public_key + "  # mine\n\n  " + kB.public_key + "\n",
        0600);
  EXPECT_EQ(read_authorized_keys(dir_), (std::vector<std::string>{kA.public_key, kB.public_key}));
  write("authorized_keys", kA.public_key + "x\n", 0600);
  EXPECT_THROW(read_authorized_keys(dir_), std::runtime_error);
}

}  // namespace
}  // namespace rwkvd::protocol
