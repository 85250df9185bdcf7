// Shared-memory inputs (protocol/shm_input.h): what a client writes the worker reads, through
// encode/decode of a request too, and every way an object can be wrong is a bad_state error.
#include "protocol/shm_input.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <span>
#include <vector>

#include "protocol/messages.h"
#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), -3.5f);
  return v;
}

ErrorCode code_of(const std::string& name, uint64_t bytes) {
  try {
    read_shm_input(name, bytes);
  } catch (const ProtocolError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error for " << name;
  return ErrorCode::kInternal;
}

// Where glibc keeps POSIX shared-memory objects.
std::filesystem::path shm_path(const std::string& name) {
  return std::filesystem::path("/dev/shm") / name.substr(1);
}

TEST(ShmInput, ReadingConsumesTheObjectAndAnUnreadOneGoesWithItsWriter) {
  const std::vector<float> data = ramp(1000);
  const ShmInput in(std::as_bytes(std::span(data)));
  EXPECT_TRUE(valid_shm_input_name(in.name())) << in.name();
  EXPECT_TRUE(
      in.name().starts_with(std::string(kShmInputPrefix) + std::to_string(::getpid()) + "-"));
  EXPECT_EQ(in.bytes(), data.size() * sizeof(float));
  struct stat st {};
  ASSERT_EQ(::stat(shm_path(in.name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_shm_input(in.name(), in.bytes()), data);
  EXPECT_FALSE(std::filesystem::exists(shm_path(in.name()))) << "read once, then removed";
  EXPECT_EQ(code_of(in.name(), 4), ErrorCode::kBadState);

  const ShmInput part(std::as_bytes(std::span(data)));
  EXPECT_EQ(read_shm_input(part.name(), 40), std::vector<float>(data.begin(), data.begin() + 10));

  std::string unread;
  {
    const ShmInput never(std::as_bytes(std::span(data)));
    unread = never.name();
    EXPECT_TRUE(std::filesystem::exists(shm_path(unread)));
  }
  EXPECT_FALSE(std::filesystem::exists(shm_path(unread)));
}

// Inputs of several MB are read in parts on threads: every part lands where it belongs, a size
// that is no multiple of a page included.
TEST(ShmInput, ALargeInputReadsBackWhole) {
  const std::vector<float> data = ramp(2'300'001);  // 9.2 MB: two or more parts
  const ShmInput in(std::as_bytes(std::span(data)));
  EXPECT_EQ(read_shm_input(in.name(), in.bytes()), data);
  const ShmInput head(std::as_bytes(std::span(data)));
  const uint64_t some = uint64_t{1'234'567} * sizeof(float);
  EXPECT_EQ(read_shm_input(head.name(), some),
            std::vector<float>(data.begin(), data.begin() + 1'234'567));
}

// Objects of clients that died before sending them name a pid that is gone.
TEST(ShmInput, StaleInputsOfDeadClientsAreRemoved) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead =
      std::string(kShmInputPrefix) + std::to_string(child) + "-" + random_hex(8);
  const int fd = ::shm_open(dead.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::vector<float> data = ramp(4);
  const ShmInput live(std::as_bytes(std::span(data)));
  EXPECT_GE(remove_stale_shm_inputs(), 1u);
  EXPECT_FALSE(std::filesystem::exists(shm_path(dead)));
  EXPECT_TRUE(std::filesystem::exists(shm_path(live.name()))) << "ours: this pid lives";
}

TEST(ShmInput, RequestsCarryTheNameAndDecodingReadsTheState) {
  const std::vector<float> data = ramp(257);
  const ShmInput in(std::as_bytes(std::span(data)));
  Request req;
  req.id = 3;
  req.op = Op::kSessionOpen;
  req.state_shm = Request::ShmInputRef{in.name(), in.bytes()};
  const std::string wire = encode_request(req);
  EXPECT_LT(wire.size(), 200u) << "the name travels, not the bytes";
  const Request back = decode_request(wire);
  ASSERT_TRUE(back.state.has_value());
  EXPECT_EQ(*back.state, data);

  Limits small;
  small.max_shm_input_bytes = 1024;
  try {
    decode_request(wire, small);
    FAIL() << "over max_shm_input_bytes";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
    EXPECT_EQ(e.id(), 3u);
  }
}

TEST(ShmInput, WrongNamesSizesAndObjectsAreBadStateErrors) {
  const std::vector<float> data = ramp(16);
  const ShmInput in(std::as_bytes(std::span(data)));
  EXPECT_EQ(code_of(in.name(), 0), ErrorCode::kBadState);
  EXPECT_EQ(code_of(in.name(), 6), ErrorCode::kBadState) << "not whole floats";
  EXPECT_EQ(code_of(in.name(), 68), ErrorCode::kBadState) << "more than the object holds";
  const std::vector<std::string> bad_names = {"/etc/passwd",
                                              "/rwkvd-in-",
                                              "/rwkvd-in-../x",
                                              "/rwkvd-in-ABC",
                                              "rwkvd-in-abc",
                                              "/rwkvd-1000-1-abc",
                                              "/rwkvd-in-" + std::string(65, 'a')};
  for (const std::string& bad : bad_names) {
    EXPECT_FALSE(valid_shm_input_name(bad)) << bad;
    EXPECT_EQ(code_of(bad, 4), ErrorCode::kBadState) << bad;
  }
  // A directory and a symbolic link with an input's name are refused too.
  const std::string dir = std::string(kShmInputPrefix) + "1-" + random_hex(8);
  std::filesystem::create_directory(shm_path(dir));
  EXPECT_EQ(code_of(dir, 4), ErrorCode::kBadState);
  std::filesystem::remove(shm_path(dir));
  const std::string link = std::string(kShmInputPrefix) + "1-" + random_hex(8);
  std::filesystem::create_symlink(shm_path(in.name()), shm_path(link));
  EXPECT_EQ(code_of(link, 4), ErrorCode::kBadState);
  std::filesystem::remove(shm_path(link));
  // One that shrinks below what the request names after the client wrote it.
  const std::vector<float> more = ramp(64);
  const ShmInput shrinking(std::as_bytes(std::span(more)));
  ASSERT_EQ(::truncate(shm_path(shrinking.name()).c_str(), 100), 0);
  EXPECT_EQ(code_of(shrinking.name(), 256), ErrorCode::kBadState);
}

}  // namespace
}  // namespace rwkvd::protocol
