#include "runtime/cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "runtime/logging.hpp"

namespace shardjit {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void lock_error(const std::string& what, const std::filesystem::path& path,
                             int error) {
  throw LockUnavailable("cannot " + what + " lock file '" + path.string() + "': " + std::strerror(error));
}

// One non-blocking attempt: true when taken, false when another holder has it.
bool try_flock(int fd, const std::filesystem::path& path) {
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) lock_error("lock", path, errno);
  }
}

// Polls with a growing sleep rather than blocking in flock, so that the wait is bounded: until
// `deadline`, the end of the caller's `timeout`.
void wait_for_lock(int fd, const std::filesystem::path& path, Clock::time_point deadline,
                   std::chrono::milliseconds timeout) {
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

// Whether the open file fd is the file at path (not one deleted, or replaced, since it was opened).
bool locks_the_path(int fd, const std::filesystem::path& path) {
  struct stat opened {};
  struct stat named {};
  if (::fstat(fd, &opened) != 0) lock_error("inspect", path, errno);
  if (::lstat(path.c_str(), &named) != 0) {
    if (errno == ENOENT) return false;
    lock_error("inspect", path, errno);
  }
  return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

}  // namespace

FileLock::FileLock(const std::filesystem::path& path, std::chrono::milliseconds timeout)
    : path_(path) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) lock_error("open", path, errno);
    bool current = false;
    try {
      wait_for_lock(fd, path_, deadline, timeout);
      current = locks_the_path(fd, path_);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (current) {
      fd_ = fd;
      return;
    }
    ::close(fd);  // its holder deleted the file meanwhile: lock the one at the path now
  }
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

void FileLock::remove_file() noexcept {
  if (fd_ >= 0) ::unlink(path_.c_str());
}

void FileLock::release() noexcept {
  if (fd_ < 0) return;
  // Closing the last descriptor of the open file releases the flock.
  ::close(fd_);
  fd_ = -1;
}

}  // namespace shardjit
