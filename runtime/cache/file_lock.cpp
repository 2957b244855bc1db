#include "runtime/cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void lock_error(const std::string& what, const std::filesystem::path& path,
                             int error) {
  throw Error(ErrorCode::kCacheError,
              "cannot " + what + " lock file '" + path.string() + "': " + std::strerror(error));
}

// One non-blocking attempt: true when taken, false when another holder has it.
bool try_flock(int fd, const std::filesystem::path& path) {
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) lock_error("lock", path, errno);
  }
}

// Polls with a growing sleep rather than blocking in flock, so that the wait is bounded.
void wait_for_lock(int fd, const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  bool logged = false;
  while (!try_flock(fd, path)) {
    auto now = Clock::now();
    if (now >= deadline) {
      throw Error(ErrorCode::kCacheError,
                  "timed out after " + std::to_string(timeout.count()) + " ms waiting for lock '" +
                      path.string() +
                      "', held by another process or thread (e.g. compiling the same kernel); "
                      "expected it to be released within the timeout");
    }
    if (!logged) {
      log().debug("waiting for lock {}", path.string());
      logged = true;
    }
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    std::this_thread::sleep_for(std::max(std::min(pause, remaining), std::chrono::milliseconds(1)));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace

FileLock::FileLock(const std::filesystem::path& path, std::chrono::milliseconds timeout)
    : path_(path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) lock_error("open", path, errno);
  try {
    wait_for_lock(fd, path_, timeout);
  } catch (...) {
    ::close(fd);
    throw;
  }
  fd_ = fd;
}

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void FileLock::release() noexcept {
  if (fd_ < 0) return;
  // Closing the last descriptor of the open file releases the flock.
  ::close(fd_);
  fd_ = -1;
}

}  // namespace shardjit
