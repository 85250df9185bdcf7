#pragma once
// Progress of long file writes (synth, quantize, convert) on stderr.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace rwkvd::tools {

// A one-line bar on a terminal, else a line per 10%, so logs stay readable.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool quiet)
      : label_(std::move(label)), quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1) {}

  void update(uint64_t done, uint64_t total, std::string_view tensor) {
    if (quiet_ || total == 0) return;
    const auto now = std::chrono::steady_clock::now();
    const int pct = static_cast<int>(100 * done / total);
    if (tty_) {
      if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
      last_ = now;
      constexpr int kWidth = 30;
      const int filled = pct * kWidth / 100;
      std::fprintf(stderr, "\r[%.*s%*s] %3d%% %8.1f / %.1f MB  %-40.40s", filled,
                   "##############################", kWidth - filled, "", pct, mb(done), mb(total),
                   std::string(tensor).c_str());
      if (done == total) std::fputc('\n', stderr);
    } else if (pct / 10 > last_decile_ || done == total) {
      last_decile_ = pct / 10;
      std::fprintf(stderr, "%s: %3d%% %.1f / %.1f MB (%s)\n", label_.c_str(), pct, mb(done), mb(total),
                   std::string(tensor).c_str());
    }
  }

 private:
  static double mb(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }
  std::string label_;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point last_{};
  int last_decile_ = 0;
};

}  // namespace rwkvd::tools
