#include "protocol/shm_ring.h"

#include "protocol/bus_guard.h"
#include "protocol/ring_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

namespace bip = boost::interprocess;

namespace rwkvd::protocol {
namespace {

// Replaced segments kept mapped (recreate()): the oldest goes when there are more.
constexpr size_t kMaxRetired = 4;

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

// MADV_POPULATE_WRITE (Linux 5.14), which older C library headers do not name.
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;
#endif
#ifdef MADV_POPULATE_READ
constexpr int kMadvPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kMadvPopulateRead = 22;
#endif

// Maps [base, base + size) into this process's page tables, a few MiB at a time until asked to
// stop. A reader that maps the ring pays a page fault (or a fault-around of 16 pages) the first
// time it reads each part: ~5300 faults for a 2.9B state (21.6 MB) landing where the client has
// not read before, 1.4 ms on a 2-core EPYC against 1.2 ms for reading the floats themselves.
// The pages exist already (the worker reserves and populates them): this allocates nothing.
void populate(const std::stop_token& stop, const char* base, size_t size) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t kChunk = size_t{8} << 20;
  for (size_t at = 0; at < size && !stop.stop_requested(); at += kChunk) {
    const size_t n = std::min(kChunk, size - at);
    // (madvise takes a void *; POPULATE_READ only reads.)
    if (::madvise(const_cast<char*>(base + at), n, kMadvPopulateRead) == 0) continue;
    // Any failure but an unknown advice (EFAULT: the object was truncated) ends it: reading
    // there would be a SIGBUS.
    if (errno != EINVAL) return;
    // Kernels before 5.14: a read a page maps it.
    for (size_t p = 0; p < n; p += page) {
      (void)*static_cast<const volatile char*>(base + at + p);
    }
  }
}

}  // namespace

std::string random_hex(size_t n_bytes) {
  std::ifstream f("/dev/urandom", std::ios::binary);
  std::string raw(n_bytes, '\0');
  if (!f.read(raw.data(), static_cast<std::streamsize>(n_bytes))) {
    throw std::runtime_error("cannot read /dev/urandom");
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

bool is_random_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

struct ShmRing::Mapping {
  bip::shared_memory_object shm;
  bip::mapped_region region;
  std::unique_ptr<BusGuard> guard;  // last: stops guarding before the region is unmapped
};

std::string ShmRing::user_prefix() {
  return "rwkvd-" + std::to_string(::getuid()) + "-";
}

std::unique_ptr<ShmRing> ShmRing::create(const Options& options) {
  if (options.n_slots == 0) throw std::runtime_error("shm ring: need at least one slot");
  std::unique_ptr<ShmRing> ring(new ShmRing());
  ring->opt_ = options;
  ring->map_fresh();
  return ring;
}

void ShmRing::map_fresh() {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t table_end = sizeof(RingHeader) + uint64_t{opt_.n_slots} * sizeof(RingSlot);
  const uint64_t data_offset = align_up(table_end, page);
  const uint64_t total = align_up(std::max(opt_.bytes, data_offset + page), page);
  std::string name = user_prefix() + std::to_string(::getpid()) + "-" + random_hex(16);
  auto map = std::make_unique<Mapping>();
  bip::permissions perm(0600);
  map->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, perm);
  char* base = nullptr;
  try {
    // shm_open applies the umask; make sure the mode is exactly 0600.
    ::fchmod(map->shm.get_mapping_handle().handle, 0600);
    map->shm.truncate(static_cast<bip::offset_t>(total));
    // Reserve the pages now: a tmpfs that runs out later would SIGBUS on a write instead.
    const int rc =
        ::posix_fallocate(map->shm.get_mapping_handle().handle, 0, static_cast<off_t>(total));
    if (rc != 0) {
      throw std::runtime_error("cannot reserve " + std::to_string(total) +
                               " bytes of shared memory: " + std::strerror(rc));
    }
    map->region = bip::mapped_region(map->shm, bip::read_write);
    base = static_cast<char*>(map->region.get_address());
    map->guard = std::make_unique<BusGuard>(base, total);
  } catch (...) {
    bip::shared_memory_object::remove(name.c_str());
    throw;
  }
  // Map every page now, not on first use: the memory is reserved by posix_fallocate anyway,
  // so this costs nothing extra, keeps page faults off the reply path, and makes the worker's
  // RSS honest from the start (a soak sees no growth from a ring slowly being cycled through).
  // The kernel maps them without our writing the zeros they already hold (half the time of a
  // memset of the ring: ~70 against ~130 ms for 256 MiB); kernels before 5.14 lack it.
  if (::madvise(base, total, kMadvPopulateWrite) != 0) std::memset(base, 0, total);
  auto* h = reinterpret_cast<RingHeader*>(base);
  std::memcpy(h->magic, kRingMagic, sizeof(kRingMagic));
  h->version = kRingVersion;
  h->header_bytes = sizeof(RingHeader);
  h->total_bytes = total;
  h->data_offset = data_offset;
  h->data_bytes = total - data_offset;
  h->n_slots = opt_.n_slots;
  h->slot_bytes = sizeof(RingSlot);
  h->pid = static_cast<uint32_t>(::getpid());
  if (map_) {
    // The old mapping stays a while, for a thread that may still be writing into it. (Its
    // object is left as it is: clients still mapping it read their slot table there.)
    retired_.push_back(std::move(map_));
    if (retired_.size() > kMaxRetired) retired_.erase(retired_.begin());
  }
  map_ = std::move(map);
  name_ = std::move(name);
  base_ = base;
  slots_ = reinterpret_cast<RingSlot*>(base + sizeof(RingHeader));
  total_bytes_ = total;
  data_offset_ = data_offset;
  data_bytes_ = total - data_offset;
  n_slots_ = opt_.n_slots;
  generations_.assign(opt_.n_slots, 0);
  free_slots_.clear();
  for (uint32_t i = opt_.n_slots; i-- > 0;) free_slots_.push_back(i);
  live_.clear();
  by_offset_.clear();
  per_owner_.clear();
  cursor_ = 0;
  bytes_in_use_ = 0;
}

ShmRing::~ShmRing() {
  if (!name_.empty()) bip::shared_memory_object::remove(name_.c_str());
}

bool ShmRing::damaged() const {
  const std::lock_guard lock(mu_);
  if (map_->guard->faults() > 0) return true;
  struct stat st {};
  return ::fstat(map_->shm.get_mapping_handle().handle, &st) == 0 &&
         static_cast<uint64_t>(st.st_size) < total_bytes_;
}

size_t ShmRing::recreate() {
  const std::lock_guard lock(mu_);
  const std::string old = name_;
  const size_t dropped = live_.size();
  map_fresh();  // throws before changing anything
  bip::shared_memory_object::remove(old.c_str());
  return dropped;
}

std::optional<uint64_t> ShmRing::find_space(uint64_t bytes) const {
  const uint64_t size = data_bytes_;
  if (bytes > size) return std::nullopt;
  // Next-fit: from the cursor to the end, then from the start. Allocations are freed out of
  // order, so walk the live ones by offset looking for a gap.
  auto try_from = [&](uint64_t start, uint64_t stop) -> std::optional<uint64_t> {
    uint64_t pos = start;
    auto it = by_offset_.lower_bound(0);
    for (; it != by_offset_.end(); ++it) {
      const Live& l = live_.at(it->second);
      const uint64_t end = l.offset + l.bytes;
      if (end <= pos) continue;
      if (l.offset >= pos + bytes) break;
      pos = end;
      if (pos + bytes > stop) return std::nullopt;
    }
    if (pos + bytes <= stop) return pos;
    return std::nullopt;
  };
  if (auto p = try_from(cursor_, size)) return p;
  return try_from(0, size);
}

std::optional<ShmRing::Allocation> ShmRing::allocate(uint64_t bytes, const std::string& owner,
                                                     Clock::time_point now) {
  const std::lock_guard lock(mu_);
  if (free_slots_.empty()) return std::nullopt;
  const uint64_t aligned = align_up(std::max<uint64_t>(bytes, 1), kRingAlign);
  const auto pos = find_space(aligned);
  if (!pos) return std::nullopt;
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  // Lease ids from the kernel's CSPRNG: one client's ids say nothing about another's.
  uint64_t lease = 0;
  while (lease == 0 || live_.count(lease) != 0) {
    if (::getrandom(&lease, sizeof lease, 0) != static_cast<ssize_t>(sizeof lease)) {
      free_slots_.push_back(slot);
      return std::nullopt;
    }
  }
  Live l{slot, 1, *pos, aligned, owner, now + opt_.lease_timeout};
  live_.emplace(lease, l);
  by_offset_.emplace(*pos, lease);
  per_owner_[owner] += 1;
  cursor_ = *pos + aligned;
  bytes_in_use_ += aligned;
  // The entry is written from our own numbers, never read back: the segment is writable by
  // any process of the user.
  const uint32_t generation = ++generations_[slot];
  const uint64_t offset = data_offset_ + *pos;
  RingSlot& s = slots_[slot];
  s.generation = generation;
  s.offset = offset;
  s.bytes = bytes;
  s.lease = lease;
  // Publish the entry after its fields (a reader that checks state sees a complete entry).
  std::atomic_thread_fence(std::memory_order_release);
  s.state = 1;
  Allocation a;
  a.ref = ShmRef{lease, slot, generation, offset, bytes};
  a.data = reinterpret_cast<float*>(base_ + offset);
  return a;
}

void ShmRing::free_live(std::map<uint64_t, Live>::iterator it) {
  RingSlot& s = slots_[it->second.slot];
  s.state = 0;
  s.lease = 0;
  free_slots_.push_back(it->second.slot);
  by_offset_.erase(it->second.offset);
  auto held = per_owner_.find(it->second.owner);
  if (held != per_owner_.end() && --held->second == 0) per_owner_.erase(held);
  bytes_in_use_ -= it->second.bytes;
  live_.erase(it);
}

bool ShmRing::release(uint64_t lease, const std::string& owner) {
  const std::lock_guard lock(mu_);
  auto it = live_.find(lease);
  if (it == live_.end() || it->second.owner != owner) return false;
  if (--it->second.refs == 0) free_live(it);
  return true;
}

bool ShmRing::retain(uint64_t lease, const std::string& owner, Clock::time_point now) {
  const std::lock_guard lock(mu_);
  auto it = live_.find(lease);
  if (it == live_.end() || it->second.owner != owner) return false;
  it->second.refs += 1;
  it->second.deadline = now + opt_.lease_timeout;
  return true;
}

std::vector<std::string> ShmRing::owners_to_check(Clock::time_point now) {
  const std::lock_guard lock(mu_);
  std::set<std::string> due;
  for (auto& [lease, l] : live_) {
    if (l.deadline > now) continue;
    due.insert(l.owner);
    l.deadline = now + opt_.lease_timeout;
  }
  return {due.begin(), due.end()};
}

size_t ShmRing::release_owner(const std::string& owner) {
  const std::lock_guard lock(mu_);
  size_t n = 0;
  for (auto it = live_.begin(); it != live_.end();) {
    auto next = std::next(it);
    if (it->second.owner == owner) {
      free_live(it);
      ++n;
    }
    it = next;
  }
  return n;
}

uint64_t ShmRing::bytes_in_use() const {
  const std::lock_guard lock(mu_);
  return bytes_in_use_;
}

uint32_t ShmRing::leases_in_use() const {
  const std::lock_guard lock(mu_);
  return static_cast<uint32_t>(live_.size());
}

uint32_t ShmRing::leases_of(const std::string& owner) const {
  const std::lock_guard lock(mu_);
  const auto it = per_owner_.find(owner);
  return it == per_owner_.end() ? 0 : it->second;
}

size_t remove_objects_of_dead_pids(const std::function<long(std::string_view)>& pid_of) {
  size_t removed = 0;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    const long pid = pid_of(n);
    struct stat st {};
    if (pid <= 0 || ::lstat(("/dev/shm/" + n).c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != ::geteuid()) {
      continue;
    }
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
        ::shm_unlink(("/" + n).c_str()) == 0) {
      ++removed;
    }
  }
  ::closedir(d);
  return removed;
}

size_t ShmRing::remove_stale() {
  // rwkvd-<uid>-<pid>-<hex>
  const std::string prefix = user_prefix();
  return remove_objects_of_dead_pids([&](std::string_view n) -> long {
    if (!n.starts_with(prefix)) return 0;
    const std::string rest(n.substr(prefix.size()));
    if (rest.find('-') == std::string::npos) return 0;
    return std::strtol(rest.c_str(), nullptr, 10);
  });
}

// ---- reader ----

struct ShmReader::Mapping {
  bip::shared_memory_object shm;
  bip::mapped_region region;
};

ShmReader::~ShmReader() = default;

std::unique_ptr<ShmReader> ShmReader::open(const std::string& name) {
  std::unique_ptr<ShmReader> r(new ShmReader());
  r->map_ = std::make_unique<Mapping>();
  try {
    r->map_->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_only);
    r->map_->region = bip::mapped_region(r->map_->shm, bip::read_only);
  } catch (const std::exception& e) {
    throw ProtocolError(ErrorCode::kBadValue,
                        "cannot map shared memory '" + name + "': " + e.what());
  }
  try {
    r->view_ = std::make_unique<RingView>(static_cast<const char*>(r->map_->region.get_address()),
                                          r->map_->region.get_size());
  } catch (const ProtocolError& e) {
    throw ProtocolError(ErrorCode::kBadValue,
                        "'" + name + "' is not an rwkvd v1 ring: " + e.what());
  }
  if (const char* e = std::getenv("RWKVD_SHM_POPULATE"); e == nullptr || std::string(e) != "0") {
    const char* base = static_cast<const char*>(r->map_->region.get_address());
    r->populate_ = std::jthread(populate, base, r->map_->region.get_size());
  }
  return r;
}

const RingHeader& ShmReader::header() const {
  return view_->header();
}

bool ShmReader::current(const ShmRef& ref) const {
  return view_->current(ref);
}

const float* ShmReader::resolve(const ShmRef& ref) const {
  check_intact();
  return view_->resolve(ref).data();
}

void ShmReader::check_intact() const {
  struct stat st {};
  if (::fstat(map_->shm.get_mapping_handle().handle, &st) == 0 &&
      static_cast<uint64_t>(st.st_size) < map_->region.get_size()) {
    throw ProtocolError(ErrorCode::kUnknownLease, "the shared-memory ring was truncated");
  }
}

bool ShmReader::detach(uint64_t offset, uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t size = map_->region.get_size();
  if (offset > size || bytes > size - offset) return false;
  const uint64_t start = offset / page * page;
  const uint64_t n = align_up(offset + bytes, page) - start;
  char* at = static_cast<char*>(map_->region.get_address()) + start;
  void* tmp = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return false;
  std::memcpy(tmp, at, n);
  if (::mprotect(tmp, n, PROT_READ) != 0 ||
      ::mremap(tmp, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, at) != at) {
    ::munmap(tmp, n);
    return false;
  }
  return true;
}

bool ShmReader::worker_alive() const {
  const auto pid = static_cast<pid_t>(view_->header().pid);
  return pid > 0 && !(::kill(pid, 0) != 0 && errno == ESRCH);
}

}  // namespace rwkvd::protocol
