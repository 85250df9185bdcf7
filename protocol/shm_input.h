#pragma once
// Request tensors through POSIX shared memory (PROTOCOL.md, "Shared-memory inputs"): a local
// client writes a large input (a 2.9B model's state is 21.6 MB) into a POSIX shared-memory object
// of its own and sends the object's name instead of the bytes; the worker reads it while it
// decodes the request, and the client removes the object once a reply has come. The result ring
// is the worker's and read-only to clients, so inputs travel in objects of the clients'.
//
// The worker reads with pread rather than a mapping: an object that shrinks meanwhile is a short
// read and a clear error, where a mapping would die of SIGBUS. Once it has read an object it
// removes it, so a client that dies after sending leaves nothing behind; one that dies before
// leaves an object that names its pid, rwkvd-in-<pid>-<32 random hex digits> (unguessable), and
// a worker starting later removes those of dead pids. The worker opens only such names, only
// regular files of its own user, never through a symbolic link.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::protocol {

inline constexpr std::string_view kShmInputPrefix = "/rwkvd-in-";

// Whether `name` is one an input object may have: the prefix, a pid (1..10 digits), '-', then
// 1..64 of [0-9a-f].
bool valid_shm_input_name(std::string_view name);

// The first `bytes` bytes of input object `name` as float32 (bytes a multiple of 4), after which
// the object is removed. Throws ProtocolError (kBadState) saying what is wrong: a name of the
// wrong form, no such object, not a regular file of this user, fewer bytes than that.
std::vector<float> read_shm_input(const std::string& name, uint64_t bytes);

// Removes the input objects of this user whose pid is gone (their clients died before sending
// them); returns how many.
size_t remove_stale_shm_inputs();

// The writing side: a fresh object (mode 0600) named for this process, holding `data`; removed
// (unlinked) when this is destroyed, unless the worker has already. Throws std::system_error when
// the object cannot be created or written.
class ShmInput {
 public:
  explicit ShmInput(std::span<const std::byte> data);
  ~ShmInput();
  ShmInput(ShmInput&& other) noexcept;
  ShmInput& operator=(ShmInput&&) = delete;
  ShmInput(const ShmInput&) = delete;
  ShmInput& operator=(const ShmInput&) = delete;

  const std::string& name() const { return name_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string name_;
  uint64_t bytes_ = 0;
};

}  // namespace rwkvd::protocol
