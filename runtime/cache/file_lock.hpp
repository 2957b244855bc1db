// An exclusive advisory lock on a file, held for the lifetime of a FileLock.
//
// flock(2): the kernel releases it when the holder closes the file or dies, so a crashed process
// never leaves the cache locked. The lock file is created (mode 0600) and never deleted: deleting
// a lock file lets two processes hold "the" lock on two different files.
//
// Two FileLocks on one path exclude each other even inside one process (each opens its own file
// description). A child forked while a lock is held shares it until one of them closes it.
#pragma once

#include <chrono>
#include <filesystem>

namespace shardjit {

class FileLock {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{std::chrono::seconds(600)};

  // Blocks until the lock is taken or timeout has passed; Error(kCacheError) naming the file on a
  // timeout or when the lock file cannot be opened. A timeout of zero tries exactly once.
  explicit FileLock(const std::filesystem::path& path,
                    std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;

  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace shardjit
