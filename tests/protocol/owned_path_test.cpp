// The rules of protocol/owned_path.h: an ipc endpoint only where no other user can change it.
#include "protocol/owned_path.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

namespace fs = std::filesystem;

class OwnedPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rwkvd-owned-" + random_hex(4));
    fs::create_directory(dir_);
    ::chmod(dir_.c_str(), 0700);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static void make_socket(const fs::path& p) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, p.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ::close(fd);
  }
  // The message of the UnsafePathError `f` throws ("" if none).
  template <class F>
  static std::string refusal(F&& f) {
    try {
      f();
    } catch (const UnsafePathError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(OwnedPathTest, APrivateDirectoryOfOursPasses) {
  EXPECT_NO_THROW(check_private_dir(dir_));
  EXPECT_NO_THROW(check_safe_dir(dir_));
  EXPECT_NO_THROW(check_safe_dir("/tmp"));  // root's, sticky
  EXPECT_NO_THROW(make_private_dir(dir_ / "sub"));
  EXPECT_EQ(fs::status(dir_ / "sub").permissions(), fs::perms::owner_all);
}

TEST_F(OwnedPathTest, ADirectoryOthersCanWriteIsRefused) {
  ::chmod(dir_.c_str(), 0777);
  EXPECT_NE(refusal([&] { check_safe_dir(dir_ / "."); }).find("writable by others"),
            std::string::npos);
  ::chmod(dir_.c_str(), 0755);
  EXPECT_NO_THROW(check_safe_dir(dir_));
  EXPECT_NE(refusal([&] { check_private_dir(dir_); }).find("mode 0755"), std::string::npos);
  ::chmod(dir_.c_str(), 01777);  // sticky, like /tmp: others cannot replace what is ours
  EXPECT_NO_THROW(check_safe_dir(dir_));
}

TEST_F(OwnedPathTest, AnotherUsersDirectoryIsRefusedAsWrittenAndAsResolved) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path theirs = dir_ / "theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), 54321, 54321), 0);
  EXPECT_NE(refusal([&] { check_safe_dir(theirs); }).find("belongs to user 54321"),
            std::string::npos);
  EXPECT_NE(refusal([&] { make_private_dir(theirs); }), "");  // made first by someone else
  // Their link to a directory of ours: they could repoint it at any moment.
  fs::create_directory(dir_ / "ours");
  fs::create_directory_symlink(dir_ / "ours", dir_ / "link");
  ASSERT_EQ(::lchown((dir_ / "link").c_str(), 54321, 54321), 0);
  EXPECT_NE(refusal([&] { check_safe_dir(dir_ / "link"); }).find("belongs to user 54321"),
            std::string::npos);
  // Our link into their directory: what it leads to is theirs.
  fs::create_directory_symlink(theirs, dir_ / "mylink");
  EXPECT_NE(refusal([&] { check_safe_dir(dir_ / "mylink"); }), "");
}

TEST_F(OwnedPathTest, APrivateDirectoryMustNotBeALink) {
  fs::create_directory(dir_ / "real");
  ::chmod((dir_ / "real").c_str(), 0700);
  fs::create_directory_symlink(dir_ / "real", dir_ / "link");
  EXPECT_NO_THROW(check_safe_dir(dir_ / "link"));  // our link to our directory
  EXPECT_NE(refusal([&] { check_private_dir(dir_ / "link"); }).find("symbolic link"),
            std::string::npos);
  EXPECT_NE(refusal([&] { make_private_dir(dir_ / "link"); }), "");
}

TEST_F(OwnedPathTest, TheSocketFileMustBeOursAndASocket) {
  EXPECT_FALSE(check_own_socket(dir_ / "none.sock"));
  make_socket(dir_ / "w.sock");
  ino_t ino = 0;
  EXPECT_TRUE(check_own_socket(dir_ / "w.sock", &ino));
  EXPECT_NE(ino, 0u);
  std::ofstream(dir_ / "file.sock") << "x";
  EXPECT_NE(refusal([&] { check_own_socket(dir_ / "file.sock"); }).find("not a socket"),
            std::string::npos);
  fs::create_symlink(dir_ / "w.sock", dir_ / "link.sock");
  EXPECT_NE(refusal([&] { check_own_socket(dir_ / "link.sock"); }).find("symbolic link"),
            std::string::npos);
  if (::getuid() == 0) {
    ASSERT_EQ(::chown((dir_ / "w.sock").c_str(), 54321, 54321), 0);
    EXPECT_NE(refusal([&] { check_own_socket(dir_ / "w.sock"); }).find("belongs to user 54321"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace rwkvd::protocol
