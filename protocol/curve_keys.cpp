#include "protocol/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "protocol/owned_path.h"
#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

// The file's lines, opened without following a link and checked to be ours and private.
std::optional<std::vector<std::string>> read_private_lines(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::getuid() &&
                  (st.st_mode & 077) == 0 && st.st_size < 65536;
  std::string text(ok ? static_cast<size_t>(st.st_size) : 0, '\0');
  const bool read_all = ok && ::read(fd, text.data(), text.size()) == st.st_size;
  ::close(fd);
  if (!ok) throw std::runtime_error(path + " must be a small file of this user with mode 0600");
  if (!read_all) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

}  // namespace

bool is_z85_key(const std::string& key) {
  static constexpr std::string_view kZ85 =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return key.size() == 40 && key.find_first_not_of(kZ85) == std::string::npos;
}

std::string curve_key_dir() {
  if (const char* c = std::getenv("XDG_CONFIG_HOME"); c != nullptr && *c == '/') {
    return std::string(c) + "/rwkvd";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home != '/') throw std::runtime_error("neither XDG_CONFIG_HOME nor HOME");
  return std::string(home) + "/.config/rwkvd";
}

std::string open_curve_key_dir() {
  const std::string dir = curve_key_dir();
  const std::string parent = dir.substr(0, dir.rfind('/'));
  if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create " + parent + ": " + std::strerror(errno));
  }
  make_private_dir(dir);
  return dir;
}

std::optional<CurveKeyPair> read_curve_pair(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name + ".key";
  const auto lines = read_private_lines(path);
  if (!lines) return std::nullopt;
  if (lines->size() < 2 || !is_z85_key((*lines)[0]) || !is_z85_key((*lines)[1])) {
    throw std::runtime_error(path + " is not a key pair (two Z85 lines: public, secret)");
  }
  return CurveKeyPair{(*lines)[0], (*lines)[1]};
}

CurveKeyPair store_curve_pair(const std::string& dir, const std::string& name,
                              const CurveKeyPair& fresh) {
  if (auto have = read_curve_pair(dir, name)) return *have;
  const std::string path = dir + "/" + name + ".key";
  const std::string tmp = path + ".tmp-" + random_hex(8);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + tmp + ": " + std::strerror(errno));
  const std::string text = fresh.public_key + "\n" + fresh.secret_key + "\n";
  const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  // link() never replaces: a pair stored meanwhile by another process stays, and is read back.
  const int linked = wrote ? ::link(tmp.c_str(), path.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!wrote) throw std::runtime_error("cannot write " + tmp);
  if (linked != 0 && link_errno != EEXIST) {
    throw std::runtime_error("cannot create " + path + ": " + std::strerror(link_errno));
  }
  return *read_curve_pair(dir, name);
}

std::vector<std::string> read_authorized_keys(const std::string& dir) {
  const std::string path = dir + "/authorized_keys";
  std::vector<std::string> keys;
  for (std::string line : read_private_lines(path).value_or(std::vector<std::string>{})) {
    line = line.substr(0, line.find('#'));
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty()) continue;
    if (!is_z85_key(line)) throw std::runtime_error(path + ": not a Z85 public key: " + line);
    keys.push_back(line);
  }
  return keys;
}

}  // namespace rwkvd::protocol
