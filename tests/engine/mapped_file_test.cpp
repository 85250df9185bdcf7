// MappedFile refuses what is not a regular file, without blocking on it: a FIFO (`rwkvd inspect
// some.fifo` used to wait in open() for a writer forever).
#include "engine/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "engine/error.h"

namespace rwkvd::engine {
namespace {

TEST(MappedFile, RefusesAFifoWithoutWaitingForAWriter) {
  const auto path =
      std::filesystem::temp_directory_path() / ("rwkvd-fifo-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // A writer that comes only if the open is still waiting after 10 s (so a failing build ends).
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> writer_came{false};
  std::thread writer([&] {
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; })) return;
    writer_came = true;
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  try {
    MappedFile f(path.string());
    ADD_FAILURE() << "a FIFO was mapped";
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(writer_came.load()) << "open() waited for a writer";
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  writer.join();
  std::filesystem::remove(path);
}

TEST(MappedFile, RefusesADirectory) {
  EXPECT_THROW(MappedFile(std::filesystem::temp_directory_path().string()), EngineError);
}

}  // namespace
}  // namespace rwkvd::engine
