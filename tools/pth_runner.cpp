#include "tools/pth_runner.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace rwkvd::tools {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

}  // namespace

bool looks_like_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "PK\x03\x04", 4) == 0;
}

std::string tools_dir() {
  if (const char* env = std::getenv("RWKVD_TOOLS_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return RWKVD_SOURCE_DIR "/tools";
}

void run_pth_to_st(const std::string& pth, const std::string& st) {
  const std::string script = (std::filesystem::path(tools_dir()) / "pth_to_st.py").string();
  if (!std::filesystem::is_regular_file(script)) {
    throw std::runtime_error("convert: " + script + " not found (set RWKVD_TOOLS_DIR to the " +
                             "folder holding pth_to_st.py)");
  }
  // posix_spawn with an argument vector: no shell, so no quoting of file names.
  std::vector<std::string> args{kPython, script, pth, st};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = ::posix_spawn(&pid, kPython, nullptr, nullptr, argv.data(), environ)) {
    throw std::runtime_error(std::string("convert: cannot run ") + kPython + ": " +
                             std::strerror(err));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("convert: waitpid failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("convert: " + pth + ": pth_to_st.py failed (see its message above)");
  }
}

}  // namespace rwkvd::tools
