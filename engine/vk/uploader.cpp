#include "engine/vk/uploader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "engine/error.h"
#include "engine/quant/dequant.h"
#include "engine/vk/commands.h"
#include "engine/vk/device_layout.h"
#include "engine/vk/vk_check.h"

namespace rwkvd::engine::vk {
namespace {

std::atomic<UploadObserver*> g_observer{nullptr};

}  // namespace

void Uploader::set_observer(UploadObserver* o) {
  g_observer = o;
}

Uploader::Uploader(Device& dev, WeightStore& store, VkDeviceSize staging_bytes)
    : dev_(dev), store_(store), start_(std::chrono::steady_clock::now()) {
  unsigned threads = dev.tuning().upload_threads;
  if (threads == 0) threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  copiers_ = std::make_unique<cpu::ThreadPool>(threads);
  VkDeviceSize total = 0;
  for (const PlacedTensor& p : store.order()) total += p.dev_bytes;
  half_ = std::max<VkDeviceSize>(std::min(staging_bytes / 2, (total + 15) / 16 * 16), 1 << 16);
  staging_ = Buffer(dev, 2 * half_, MemKind::kUpload);

  VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &tci;
  RWKVD_VK(vkCreateSemaphore(dev.device(), &sci, nullptr, &timeline_));
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = dev.transfer_family();
  RWKVD_VK(vkCreateCommandPool(dev.device(), &pci, nullptr, &pool_));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.commandBufferCount = 2;
  RWKVD_VK(vkAllocateCommandBuffers(dev.device(), &ai, cbs_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (VkFence& f : fences_) RWKVD_VK(vkCreateFence(dev.device(), &fci, nullptr, &f));
  thread_ = std::thread([this] { run(); });
}

Uploader::~Uploader() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  VkDevice d = dev_.device();
  for (int i = 0; i < 2; ++i) {
    if (pending_[i]) vkWaitForFences(d, 1, &fences_[i], VK_TRUE, UINT64_MAX);
    vkDestroyFence(d, fences_[i], nullptr);
  }
  vkDestroyCommandPool(d, pool_, nullptr);
  vkDestroySemaphore(d, timeline_, nullptr);
}

// Ends the current half's command buffer and submits it (signalling `value` when asked), then
// makes the other half current, waiting for its previous copies to finish first.
void Uploader::flush(bool signal, uint64_t value) {
  if (recording_) {
    staging_.flush(cur_ * half_, fill_);
    RWKVD_VK(vkEndCommandBuffer(cbs_[cur_]));
    RWKVD_VK(vkResetFences(dev_.device(), 1, &fences_[cur_]));
    SubmitSync sync;
    if (signal) {
      sync.signal = timeline_;
      sync.signal_value = value;
    }
    submit_transfer(dev_, {&cbs_[cur_], 1}, fences_[cur_], sync);
    pending_[cur_] = true;
    recording_ = false;
    cur_ ^= 1u;
  }
  fill_ = 0;
}

void Uploader::begin() {
  if (recording_) return;
  if (pending_[cur_]) {
    RWKVD_VK(vkWaitForFences(dev_.device(), 1, &fences_[cur_], VK_TRUE, UINT64_MAX));
    pending_[cur_] = false;
  }
  RWKVD_VK(vkResetCommandBuffer(cbs_[cur_], 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  RWKVD_VK(vkBeginCommandBuffer(cbs_[cur_], &bi));
  recording_ = true;
}

void Uploader::copy(std::byte* to, const std::byte* from, size_t n) {
  constexpr size_t kPiece = size_t{256} << 10;
  if (n < 2 * kPiece || copiers_->size() == 1) {
    std::memcpy(to, from, n);
    return;
  }
  copiers_->parallel_for((n + kPiece - 1) / kPiece, [&](size_t b, size_t e, unsigned) {
    const size_t lo = b * kPiece, hi = std::min(n, e * kPiece);
    std::memcpy(to + lo, from + lo, hi - lo);
  });
}

void Uploader::rewrite(GgmlType type, uint64_t K, const std::byte* from, std::byte* to,
                       uint64_t rows) {
  const uint64_t src_row = *ggml_row_bytes(type, K), dst_row = device_row_bytes(type, K);
  const uint64_t per_piece = std::max<uint64_t>(1, (uint64_t{256} << 10) / dst_row);
  if (rows < 2 * per_piece || copiers_->size() == 1) {
    to_device_rows(type, K, from, to, rows);
    return;
  }
  copiers_->parallel_for((rows + per_piece - 1) / per_piece, [&](size_t b, size_t e, unsigned) {
    const uint64_t lo = b * per_piece, hi = std::min<uint64_t>(rows, e * per_piece);
    to_device_rows(type, K, from + lo * src_row, to + lo * dst_row, hi - lo);
  });
}

void Uploader::run() {
  try {
    const auto& order = store_.order();
    for (size_t i = 0; i < order.size() && !stop_; ++i) {
      const PlacedTensor& p = order[i];
      const GgufTensor& t = *p.tensor;
      VkBuffer dst = p.is_vec ? store_.vecs().handle() : store_.buffer(p.buffer).handle();
      VkDeviceSize done = 0;
      while (done < p.dev_bytes && !stop_) {
        begin();
        VkDeviceSize n = std::min(p.dev_bytes - done, half_ - fill_);
        std::byte* to = static_cast<std::byte*>(staging_.mapped()) + cur_ * half_ + fill_;
        if (p.is_vec) {
          // Converted to float32 element by element (1-D tensors are small).
          n = n / 4 * 4;
          const int64_t first = static_cast<int64_t>(done / 4), count = static_cast<int64_t>(n / 4);
          const size_t esize = t.type == GgmlType::F32 ? 4 : 2;
          dequantize(t.type, t.data.data() + static_cast<size_t>(first) * esize,
                     reinterpret_cast<float*>(to), count);
        } else if (rewrites_rows(t.type)) {
          // Whole rows into their device form (device_layout.h); a row that does not fit the
          // staging half's rest goes into the next half.
          const uint64_t K = static_cast<uint64_t>(t.ne[0]), dst_row = device_row_bytes(t.type, K);
          if (dst_row > half_)
            throw EngineError("vulkan: a row of " + std::string(t.name) +
                              " exceeds the staging buffer");
          n = n / dst_row * dst_row;
          rewrite(t.type, K, t.data.data() + done / dst_row * *ggml_row_bytes(t.type, K), to,
                  n / dst_row);
        } else {
          copy(to, t.data.data() + done, n);
        }
        if (n > 0) {
          VkBufferCopy region{cur_ * half_ + fill_, p.offset + done, n};
          vkCmdCopyBuffer(cbs_[cur_], staging_.handle(), dst, 1, &region);
        }
        fill_ += n;
        done += n;
        if (half_ - fill_ < 4 || n == 0) flush(false, 0);
      }
      const bool segment_end = i + 1 == order.size() || order[i + 1].segment != p.segment;
      if (segment_end && !stop_) {
        // The signal rides on a submission, after every earlier copy. On a transfer queue of its
        // own, the forward's submissions wait for it on the GPU (the semaphore pair is the
        // memory dependency between the queues). On the compute queue a barrier after the copies
        // orders them before every later dispatch of that queue instead, and the forward only
        // waits on the host: lavapipe (Mesa 22.3) crashed or hung now and then in its queue
        // thread when submissions waited on this semaphore.
        begin();
        if (!dev_.dedicated_transfer()) {
          VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
          mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
          mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
          vkCmdPipelineBarrier(cbs_[cur_], VK_PIPELINE_STAGE_TRANSFER_BIT,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                               nullptr);
        }
        flush(true, p.segment + 1);
        if (UploadObserver* o = g_observer.load()) o->uploaded(p.segment);
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (pending_[i]) {
        RWKVD_VK(vkWaitForFences(dev_.device(), 1, &fences_[i], VK_TRUE, UINT64_MAX));
        pending_[i] = false;
      }
    }
    if (!stop_) {
      resident_s_ =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      done_ = true;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(err_mu_);
    error_ = std::current_exception();
  }
}

void Uploader::wait_segment(uint32_t s) {
  const uint64_t want = uint64_t{s} + 1;
  if (UploadObserver* o = g_observer.load()) {
    uint64_t resident = 0;
    RWKVD_VK(vkGetSemaphoreCounterValue(dev_.device(), timeline_, &resident));
    o->waiting(s, resident);
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(err_mu_);
      if (error_) std::rethrow_exception(error_);
    }
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    wi.pSemaphores = &timeline_;
    wi.pValues = &want;
    const VkResult r = vkWaitSemaphores(dev_.device(), &wi, 100'000'000);  // 100 ms
    if (r == VK_SUCCESS) return;
    if (r != VK_TIMEOUT) vk_fail(r, "vkWaitSemaphores");
  }
}

}  // namespace rwkvd::engine::vk
