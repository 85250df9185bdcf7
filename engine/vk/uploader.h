#pragma once
// Streams the weights from the mmapped GGUF to the device on a background thread, in forward
// order, through a bounded double-buffered staging area (no host copy of the model is ever
// made). After each segment (embedding, layer l, head) it signals a timeline semaphore, so a
// forward that needs layer l waits for layer l only.
#include <vulkan/vulkan.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/cpu/thread_pool.h"
#include "engine/model.h"
#include "engine/vk/buffer.h"
#include "engine/vk/device.h"
#include "engine/vk/weights.h"

namespace rwkvd::engine::vk {

// Test hook (null outside tests): sees the upload from both sides, so a test can hold the upload
// thread after a chosen segment and observe what a forward does meanwhile. Process-wide, because
// the uploader lives inside the backend.
class UploadObserver {
 public:
  virtual ~UploadObserver() = default;
  // On the upload thread, after segment `s`'s copies and its signal were submitted.
  virtual void uploaded(uint32_t s) = 0;
  // In wait_segment(s), before waiting; `resident` = segments whose copies have completed.
  virtual void waiting(uint32_t s, uint64_t resident) = 0;
};

class Uploader {
 public:
  // Starts uploading at once. `staging_bytes` bounds the pinned host memory used.
  Uploader(Device& dev, WeightStore& store, VkDeviceSize staging_bytes = VkDeviceSize{16} << 20);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Blocks until segment `s` is on the device; rethrows the uploader's error if it failed.
  void wait_segment(uint32_t s);
  void wait_all() { wait_segment(store_.n_segments() - 1); }
  bool all_resident() const { return done_.load(); }
  // Seconds from construction until everything was resident (negative until then).
  double resident_seconds() const { return resident_s_.load(); }
  VkSemaphore timeline() const { return timeline_; }
  // Installs (or clears, with nullptr) the observer of every uploader; the caller keeps it alive.
  static void set_observer(UploadObserver* o);

 private:
  void run();
  void begin();
  void flush(bool signal, uint64_t value);
  // memcpy from the mapped file into staging, split over copiers_: one thread cannot take page
  // faults and copy fast enough to keep up with the GPU's side of the upload.
  void copy(std::byte* to, const std::byte* from, size_t n);
  // to_device_rows() for types whose rows change on the device, split over copiers_ likewise.
  void rewrite(GgmlType type, uint64_t K, const std::byte* from, std::byte* to, uint64_t rows);

  Device& dev_;
  WeightStore& store_;
  std::unique_ptr<cpu::ThreadPool> copiers_;  // Tuning::upload_threads
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cbs_[2]{};
  VkFence fences_[2]{};
  bool pending_[2]{};
  Buffer staging_;
  VkDeviceSize half_ = 0, fill_ = 0;
  uint32_t cur_ = 0;
  bool recording_ = false;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<double> resident_s_{-1.0};
  std::mutex err_mu_;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace rwkvd::engine::vk
