#include "protocol/bus_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

namespace rwkvd::protocol {
namespace {

// The guarded mappings, read by the signal handler: fixed storage and atomics only (a handler
// may neither lock nor allocate). A slot is in use while its size is non-zero.
struct Guarded {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
  std::atomic<uint64_t> faults{0};
};
constexpr size_t kMaxGuarded = 64;
Guarded g_guarded[kMaxGuarded];
std::atomic<uintptr_t> g_page_mask{0};
struct sigaction g_previous {};
std::mutex g_mu;  // registration (not the handler)
bool g_installed = false;

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Guarded& g : g_guarded) {
    const size_t size = g.size.load(std::memory_order_acquire);
    const uintptr_t base = g.base.load(std::memory_order_acquire);
    if (size == 0 || addr < base || addr - base >= size) continue;
    // mmap is a plain system call here; the page replaces the vanished one and the faulting
    // access is retried on return.
    void* page = reinterpret_cast<void*>(addr & g_page_mask.load(std::memory_order_relaxed));
    void* got = ::mmap(page, ~g_page_mask.load(std::memory_order_relaxed) + 1,
                       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (got == MAP_FAILED) break;
    g.faults.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Not ours: what would have happened without us.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // the access faults again on return, now with the default
  }
}

void install_once() {
  if (g_installed) return;
  g_page_mask.store(~static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE) - 1));
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, &g_previous) != 0) {
    throw std::runtime_error("cannot install the SIGBUS handler");
  }
  g_installed = true;
}

}  // namespace

BusGuard::BusGuard(void* base, size_t size) {
  const std::lock_guard lock(g_mu);
  install_once();
  for (size_t i = 0; i < kMaxGuarded; ++i) {
    Guarded& g = g_guarded[i];
    if (g.size.load() != 0) continue;
    g.faults.store(0);
    g.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    g.size.store(size, std::memory_order_release);
    index_ = i;
    return;
  }
  throw std::runtime_error("too many shared-memory mappings guarded at once");
}

BusGuard::~BusGuard() {
  const std::lock_guard lock(g_mu);
  g_guarded[index_].size.store(0, std::memory_order_release);
}

uint64_t BusGuard::faults() const {
  return g_guarded[index_].faults.load(std::memory_order_relaxed);
}

}  // namespace rwkvd::protocol
