// An exclusive advisory lock on a file, held for the lifetime of a FileLock.
//
// flock(2): the kernel releases it when the holder closes the file or dies, so a crashed process
// never leaves the cache locked. The lock file is created (mode 0600). Only its holder deletes it
// (remove_file), as the last thing it does with the lock, and every taker checks, once its flock
// is granted, that the file it locked is still the one at the path, and starts again if not: so
// no two takers are ever both past that check on different files, and lock files need not pile up.
//
// Two FileLocks on one path exclude each other even inside one process (each opens its own file
// description). A child forked while a lock is held shares it until one of them closes it.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "shardjit/error.hpp"

namespace shardjit {

// Error(kCacheError) from FileLock when the file system cannot lock at all: the lock file cannot
// be opened or created (a full disk, a quota), or flock is refused (e.g. NFS without a lock
// daemon). A timeout is a plain Error: someone holds the lock.
class LockUnavailable : public Error {
 public:
  explicit LockUnavailable(const std::string& message) : Error(ErrorCode::kCacheError, message) {}
};

class FileLock {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{std::chrono::seconds(600)};

  // Blocks until the lock is taken or timeout has passed; Error(kCacheError) naming the file on a
  // timeout, LockUnavailable when the file cannot be opened or locked. A timeout of zero tries
  // exactly once.
  explicit FileLock(const std::filesystem::path& path,
                    std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Deletes the lock file, still held (its key needs no lock any more: its entry was evicted).
  // The holder's last act with the lock: a new taker may lock a new file at the path at once. A
  // process waiting on the old file finds it gone once granted, and opens the path again.
  void remove_file() noexcept;

 private:
  void release() noexcept;

  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace shardjit
