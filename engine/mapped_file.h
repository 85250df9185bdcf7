#pragma once
// A read-only memory map of a whole file. Tensors of a GGUF are views into it; nothing is copied.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace rwkvd::engine {

class MappedFile {
 public:
  // Maps `path` read-only; throws EngineError naming the path on failure. An empty file maps to
  // an empty span.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Hints the kernel to read [offset, offset+len) ahead (used by the incremental uploader).
  void prefetch(std::size_t offset, std::size_t len) const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rwkvd::engine
