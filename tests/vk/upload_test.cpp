// Incremental upload: a forward starts before the model is resident. An observer holds the
// upload thread right after layer 0's weights (segment 1) were sent and lets it go only when
// the forward asks for layer 1 (segment 2), which it does after submitting the embedding's and
// layer 0's work. The check is on order, not on time: a backend that waited for every weight
// before starting would ask for the last segment first (or never ask, and the hold times out).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "engine/vk/uploader.h"
#include "tests/support/fixtures.h"
#include "tests/vk/backend_harness.h"

namespace rwkvd::engine {
namespace {

using namespace std::chrono_literals;

class HoldUpload : public vk::UploadObserver {
 public:
  explicit HoldUpload(uint32_t after) : after_(after) {}

  void uploaded(uint32_t s) override {
    if (s != after_) return;
    std::unique_lock<std::mutex> lock(mu_);
    // Generous: a release comes within one forward; no release means the test failed.
    released_in_time_ = cv_.wait_for(lock, 60s, [&] { return released_; });
  }

  void waiting(uint32_t s, uint64_t resident) override {
    std::lock_guard<std::mutex> lock(mu_);
    waits_.push_back({s, resident});
    if (s > after_) {
      released_ = true;
      cv_.notify_all();
    }
  }

  struct Wait {
    uint32_t segment;
    uint64_t resident;  // segments whose copies had completed
  };
  std::vector<Wait> waits() {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_;
  }
  bool released_in_time() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_in_time_;
  }

 private:
  const uint32_t after_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false, released_in_time_ = true;
  std::vector<Wait> waits_;
};

// Installs an observer for the scope (the backend must be gone before it is).
struct ObserverScope {
  explicit ObserverScope(vk::UploadObserver* o) { vk::Uploader::set_observer(o); }
  ~ObserverScope() { vk::Uploader::set_observer(nullptr); }
};

class VkUpload : public test::VkBackendTest {};

TEST_F(VkUpload, ForwardStartsBeforeTheModelIsResident) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const std::vector<int32_t> toks{34, 105, 110};
  std::vector<float> want;
  {
    auto ref = test::gpu(model);
    ref->wait_resident();
    want = test::run_one(*ref, toks, OutputMode::kAllLogits);
  }

  HoldUpload hold(1);  // after layer 0
  std::vector<float> got;
  std::vector<HoldUpload::Wait> waits;
  uint32_t n_segments = 0;
  {
    ObserverScope scope(&hold);
    auto b = test::gpu(model);
    n_segments = b->hparams().n_layer + 2;
    got = test::run_one(*b, toks, OutputMode::kAllLogits);
    waits = hold.waits();
    b->wait_resident();
  }
  EXPECT_TRUE(hold.released_in_time()) << "the forward never asked for layer 1";
  // The forward asked for the embedding, layer 0, then layer 1, in that order, and when it
  // asked for layer 1 (having submitted the work of the first two) at most those two were
  // resident: the upload thread cannot pass the hold before that request.
  ASSERT_GE(waits.size(), 3u);
  for (uint32_t s = 0; s < 3; ++s) EXPECT_EQ(waits[s].segment, s);
  EXPECT_LE(waits[2].resident, 2u);
  EXPECT_LT(waits[2].resident, n_segments);
  // Weights that arrived layer by layer give the same bits as weights that were all there.
  EXPECT_EQ(got, want);
}

// The upload's queue is a transfer-only family's where the device has one (NVIDIA GPUs: the copy
// engines), else the compute queue; Tuning::transfer_queue off forces the compute queue.
TEST(VkDevice, UploadUsesTheTransferOnlyQueueFamilyWhereThereIsOne) {
  test::enable_validation();
  const uint64_t errors = vk::Device::validation_errors();
  for (const bool forced_off : {false, true}) {
    vk::Device dev([&](vk::Tuning& t) { t.transfer_queue = !forced_off; });
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(dev.physical(), &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(dev.physical(), &n, fams.data());
    const bool exists = std::any_of(fams.begin(), fams.end(), [](const VkQueueFamilyProperties& f) {
      return (f.queueFlags & VK_QUEUE_TRANSFER_BIT) &&
             !(f.queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT));
    });
    SCOPED_TRACE(forced_off ? "no transfer queue" : "default");
    EXPECT_EQ(dev.dedicated_transfer(), exists && !forced_off);
    if (dev.dedicated_transfer()) {
      const VkQueueFlags f = fams[dev.transfer_family()].queueFlags;
      EXPECT_TRUE(f & VK_QUEUE_TRANSFER_BIT);
      EXPECT_FALSE(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT));
      EXPECT_NE(&dev.transfer_mutex(), &dev.queue_mutex());
    } else {
      EXPECT_EQ(dev.transfer_family(), dev.queue_family());
      EXPECT_EQ(dev.transfer_queue(), dev.queue());
      EXPECT_EQ(&dev.transfer_mutex(), &dev.queue_mutex());
    }
  }
  RWKVD_EXPECT_NO_VALIDATION_ERRORS(errors);
}

// The layer-by-layer upload gives the same bits on the compute queue as on the upload's own.
TEST_F(VkUpload, ComputeQueueUploadGivesTheSameResult) {
  RWKVD_FIXTURE(model, "rwkv7/tiny-rwkv7-834K.f32.gguf");
  const std::vector<int32_t> toks{34, 105, 110, 7};
  std::vector<float> results[2];
  for (const bool forced_off : {false, true}) {
    auto b = test::gpu(model, 256, 1, [&](vk::Tuning& t) { t.transfer_queue = !forced_off; });
    results[forced_off] = test::run_one(*b, toks, OutputMode::kAllLogits);  // while uploading
    b->wait_resident();
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace rwkvd::engine
