#include "protocol/shm_input.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "protocol/messages.h"
#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& why) {
  throw ProtocolError(ErrorCode::kBadState, "state: shared-memory input " + name + " " + why);
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The pid an input object's name carries, 0 if it is no input's name.
long shm_input_pid(std::string_view name) {
  if (!name.starts_with(kShmInputPrefix)) return 0;
  const std::string_view rest = name.substr(kShmInputPrefix.size());
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 10) return 0;
  const std::string_view pid = rest.substr(0, dash), hex = rest.substr(dash + 1);
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!std::all_of(pid.begin(), pid.end(), digit) || hex.empty() || hex.size() > 64 ||
      !is_random_hex(hex)) {
    return 0;
  }
  return std::strtol(std::string(pid).c_str(), nullptr, 10);
}

}  // namespace

bool valid_shm_input_name(std::string_view name) {
  return shm_input_pid(name) > 0;
}

std::vector<float> read_shm_input(const std::string& name, uint64_t bytes) {
  if (!valid_shm_input_name(name)) {
    bad("'" + name.substr(0, 80) + "'",
        "has not the form " + std::string(kShmInputPrefix) + "<pid>-<hex digits>");
  }
  if (bytes == 0 || bytes % sizeof(float) != 0) {
    bad(name, ": " + std::to_string(bytes) + " bytes is not a whole number of float32 values");
  }
  const Fd f{::shm_open(name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0)};
  if (f.fd < 0) bad(name, "cannot be opened: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) bad(name, "cannot be read: " + std::string(std::strerror(errno)));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    bad(name, "is not a shared-memory object of this worker's user");
  }
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    bad(name, "holds " + std::to_string(st.st_size) + " bytes, fewer than the " +
                  std::to_string(bytes) + " the request names");
  }
  std::vector<float> out(bytes / sizeof(float));
  auto* dst = reinterpret_cast<char*>(out.data());
  // A large input (a 2.9B state is 21.6 MB) is read in parts on several threads: one thread
  // copies ~3-4 GB/s out of the page cache, and every request behind this one on the server
  // thread waits for it.
  constexpr uint64_t kPartBytes = uint64_t{4} << 20;
  const auto parts = static_cast<unsigned>(std::clamp<uint64_t>(
      bytes / kPartBytes, 1, std::max(1u, std::thread::hardware_concurrency())));
  const uint64_t step = (bytes / parts + 4095) & ~uint64_t{4095};
  std::vector<uint64_t> got(parts, 0);  // bytes each part read before it ended
  auto read_part = [&](unsigned p) {
    const uint64_t begin = std::min(bytes, p * step), end = std::min(bytes, begin + step);
    uint64_t at = begin;
    while (at < end) {
      const ssize_t n = ::pread(f.fd, dst + at, end - at, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      at += static_cast<uint64_t>(n);
    }
    got[p] = at - begin;
  };
  std::vector<std::thread> threads;
  for (unsigned p = 1; p < parts; ++p) threads.emplace_back(read_part, p);
  read_part(0);
  for (std::thread& t : threads) t.join();
  uint64_t done = 0;  // bytes read before the first part that came short
  for (unsigned p = 0; p < parts; ++p) {
    done += got[p];
    if (got[p] < std::min(bytes, (p + 1) * step) - std::min(bytes, p * step)) break;
  }
  if (done < bytes) {
    bad(name, "ended after " + std::to_string(done) + " of " + std::to_string(bytes) +
                  " bytes (it shrank while read)");
  }
  ::shm_unlink(name.c_str());  // consumed: nothing is left behind if the client dies now
  return out;
}

size_t remove_stale_shm_inputs() {
  return remove_objects_of_dead_pids(
      [](std::string_view n) { return shm_input_pid("/" + std::string(n)); });
}

ShmInput::ShmInput(std::span<const std::byte> data)
    : name_(std::string(kShmInputPrefix) + std::to_string(::getpid()) + "-" + random_hex(16)),
      bytes_(data.size()) {
  const Fd f{::shm_open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (f.fd < 0) throw std::system_error(errno, std::generic_category(), "shm_open " + name_);
  const char* src = reinterpret_cast<const char*>(data.data());
  uint64_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(f.fd, src + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::shm_unlink(name_.c_str());
      throw std::system_error(err, std::generic_category(), "writing " + name_);
    }
    done += static_cast<uint64_t>(n);
  }
}

ShmInput::ShmInput(ShmInput&& other) noexcept
    : name_(std::move(other.name_)), bytes_(other.bytes_) {
  other.name_.clear();
}

ShmInput::~ShmInput() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
}

}  // namespace rwkvd::protocol
