#include "runtime/cache/file_lock.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"

namespace shardjit {
namespace {

using namespace std::chrono_literals;
using test::mode_of;
using testing::TempDir;

// The message of the timeout error when taking path with timeout, or "" when it was taken.
std::string lock_failure(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  try {
    FileLock lock(path, timeout);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kCacheError);
    return error.what();
  }
  return "";
}

// How many of this process's descriptors are open on the file at `path`.
int descriptors_on(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path target = std::filesystem::canonical(path, error);
  if (error) return 0;
  int count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    std::error_code link_error;
    if (std::filesystem::read_symlink(it->path(), link_error) == target && !link_error) ++count;
  }
  return count;
}

// A child process that takes the lock, tells the parent through a pipe, and waits to be killed.
pid_t spawn_holder(const std::filesystem::path& path) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    try {
      FileLock lock(path);
      char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      while (true) ::pause();
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  ssize_t got = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  return got == 1 ? pid : -1;
}

TEST(FileLock, CreatesLockFileWithMode0600AndLeavesItOnRelease) {
  TempDir temp;
  const auto path = temp.path() / "k.lock";
  {
    FileLock lock(path);
    EXPECT_EQ(lock.path(), path);
    EXPECT_EQ(mode_of(path), 0600u);
  }
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(FileLock, ReleasedWhenDestroyed) {
  TempDir temp;
  const auto path = temp.path() / "k.lock";
  { FileLock lock(path); }
  EXPECT_EQ(lock_failure(path, 0ms), "");
}

TEST(FileLock, SecondHolderInTheSameProcessWaitsAndTimesOut) {
  TempDir temp;
  const auto path = temp.path() / "k.lock";
  FileLock held(path);
  std::string message = lock_failure(path, 0ms);
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
}

TEST(FileLock, MovedLockStaysHeldUntilTheNewOwnerIsDestroyed) {
  TempDir temp;
  const auto path = temp.path() / "k.lock";
  {
    FileLock first(path);
    FileLock second = std::move(first);
    EXPECT_NE(lock_failure(path, 0ms), "");
  }
  EXPECT_EQ(lock_failure(path, 0ms), "");
}

TEST(FileLock, OtherProcessTimesOutWhileHeldAndTakesItAfterTheHolderIsKilled) {
  TempDir temp;
  const auto path = temp.path() / "k.lock";
  pid_t holder = spawn_holder(path);
  ASSERT_GT(holder, 0) << "the holder process did not take the lock";

  auto start = std::chrono::steady_clock::now();
  std::string message = lock_failure(path, 200ms);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 5s);

  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(holder, &status, 0), holder);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // The kernel released the flock with the dead process; the file is still there.
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(lock_failure(path, 2000ms), "");
}

// A holder deletes the file while another thread waits on it: once granted, the waiter finds its
// file gone and locks a new one at the path, which a third taker then cannot take.
TEST(FileLock, WaiterOnADeletedFileLocksTheOneAtThePath) {
  TempDir temp;
  const auto path = temp.path() / "k.lock";
  std::optional<FileLock> holder(std::in_place, path);
  std::optional<FileLock> waiter;
  std::thread thread([&] { waiter.emplace(path, 5000ms); });
  // Until the waiter has the old file open too (the holder's descriptor is the first).
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (descriptors_on(path) < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(descriptors_on(path), 2) << "the waiter did not open the lock file";
  holder->remove_file();
  EXPECT_FALSE(std::filesystem::exists(path));
  holder.reset();
  thread.join();
  ASSERT_TRUE(waiter.has_value());
  EXPECT_TRUE(std::filesystem::exists(path)) << "the waiter locks a file at the path";
  EXPECT_NE(lock_failure(path, 0ms), "") << "a third taker must find the waiter's lock";
  waiter.reset();
  EXPECT_EQ(lock_failure(path, 0ms), "");
}

TEST(FileLock, UnopenableLockFileNamesThePath) {
  TempDir temp;
  const auto path = temp.path() / "missing-folder" / "k.lock";
  std::string message = lock_failure(path, 0ms);
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
}

}  // namespace
}  // namespace shardjit
