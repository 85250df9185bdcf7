#include "protocol/owned_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace rwkvd::protocol {
namespace {

std::string mode_octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw UnsafePathError(path + " " + why +
                        ": another user could put their own socket there; refusing to use it");
}

bool trusted_owner(uid_t uid) {
  return uid == 0 || uid == ::getuid();
}

struct stat lstat_or_throw(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    throw UnsafePathError("cannot check " + path + ": " + std::strerror(errno));
  }
  return st;
}

// A directory others could change: theirs, or writable by them without the sticky bit.
void check_dir_entry(const std::string& path, const struct stat& st) {
  if (!trusted_owner(st.st_uid)) refuse(path, "belongs to user " + std::to_string(st.st_uid));
  if (S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
      (st.st_mode & S_ISVTX) == 0) {
    refuse(path, "is writable by others (mode " + mode_octal(st.st_mode) + ")");
  }
}

// Each prefix of an absolute path: "/", "/a", "/a/b", ...
template <class F>
void for_each_prefix(const std::string& path, F&& f) {
  std::filesystem::path so_far = "/";
  f(so_far.string());
  for (const auto& part : std::filesystem::path(path).relative_path()) {
    if (part.empty() || part == ".") continue;
    so_far /= part;
    f(so_far.string());
  }
}

}  // namespace

void check_safe_dir(const std::string& dir) {
  const std::string abs = std::filesystem::absolute(dir).lexically_normal().string();
  // As written: a link is judged by its own owner (lstat), what it leads to by stat.
  for_each_prefix(abs, [](const std::string& p) {
    const struct stat l = lstat_or_throw(p);
    check_dir_entry(p, l);
    if (S_ISLNK(l.st_mode)) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) refuse(p, "is a dangling symbolic link");
      check_dir_entry(p + " (the link's target)", st);
    }
  });
  // As resolved: every real directory the kernel walks through.
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(abs.c_str(), nullptr), &std::free);
  if (!real) throw UnsafePathError("cannot resolve " + abs + ": " + std::strerror(errno));
  for_each_prefix(real.get(), [](const std::string& p) { check_dir_entry(p, lstat_or_throw(p)); });
  struct stat st {};
  if (::stat(real.get(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw UnsafePathError(abs + " is not a directory");
  }
}

void check_private_dir(const std::string& dir) {
  const struct stat st = lstat_or_throw(dir);
  if (S_ISLNK(st.st_mode)) refuse(dir, "is a symbolic link");
  if (!S_ISDIR(st.st_mode)) refuse(dir, "is not a directory");
  if (st.st_uid != ::getuid()) refuse(dir, "belongs to user " + std::to_string(st.st_uid));
  if ((st.st_mode & 077) != 0) {
    refuse(dir, "is open to other users (mode " + mode_octal(st.st_mode) + ", wanted 0700)");
  }
  check_safe_dir(dir);
}

void make_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw UnsafePathError("cannot create " + dir + ": " + std::strerror(errno));
  }
  check_private_dir(dir);
}

bool check_own_socket(const std::string& path, ino_t* ino, dev_t* dev) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw UnsafePathError("cannot check " + path + ": " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) refuse(path, "is a symbolic link");
  if (!S_ISSOCK(st.st_mode)) throw UnsafePathError(path + " is not a socket");
  if (st.st_uid != ::getuid()) refuse(path, "belongs to user " + std::to_string(st.st_uid));
  if (ino != nullptr) *ino = st.st_ino;
  if (dev != nullptr) *dev = st.st_dev;
  return true;
}

}  // namespace rwkvd::protocol
