#include "runtime/cache/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void file_error(const std::string& what, const fs::path& path, int error) {
  throw FileError("cannot " + what + " '" + path.string() + "': " + std::strerror(error), error);
}

// fail_next_file_writes_for_testing's failures still to come, and their errno.
std::atomic<int> injected_failures_left{0};
std::atomic<int> injected_errno{0};

// The errno the next write must fail with, when a test asked for it; 0 (nearly always) when not.
int take_injected_failure() {
  int left = injected_failures_left.load();
  while (left > 0) {
    if (injected_failures_left.compare_exchange_weak(left, left - 1)) return injected_errno.load();
  }
  return 0;
}

// Owns a file descriptor; closing is checked explicitly where it matters (after writes).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int close_checked() {
    int status = ::close(fd_);
    fd_ = -1;
    return status;
  }

 private:
  int fd_;
};

// A temporary file that removes itself unless it was renamed into place.
class TempFile {
 public:
  explicit TempFile(fs::path path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const fs::path& path() const { return path_; }
  void commit() { committed_ = true; }

 private:
  fs::path path_;
  bool committed_ = false;
};

std::string temp_file_name() {
  std::random_device device;
  std::uint64_t random = (std::uint64_t{device()} << 32) ^ device();
  char name[64];
  std::snprintf(name, sizeof name, "%.*s%ld-%016llx", static_cast<int>(kTempFilePrefix.size()),
                kTempFilePrefix.data(), static_cast<long>(::getpid()),
                static_cast<unsigned long long>(random));
  return name;
}

FileIdentity identity_of(const struct stat& info) {
  return {static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino)};
}

void write_all(int fd, std::string_view bytes, const fs::path& path) {
  if (const int injected = take_injected_failure()) file_error("write", path, injected);
  while (!bytes.empty()) {
    ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      file_error("write", path, errno);
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
}

std::size_t read_some(int fd, char* out, std::size_t size, const fs::path& path) {
  while (true) {
    ssize_t got = ::read(fd, out, size);
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) file_error("read", path, errno);
  }
}

void fsync_folder(const fs::path& folder) {
  Fd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) file_error("open folder", folder, errno);
  if (::fsync(fd.get()) != 0) file_error("fsync folder", folder, errno);
}

}  // namespace

bool FileError::out_of_space() const noexcept {
  return system_error_ == ENOSPC || system_error_ == EDQUOT;
}

void fail_next_file_writes_for_testing(int count, int error) {
  injected_errno.store(error);
  injected_failures_left.store(count);
}

std::optional<FileBytes> read_whole_file(const fs::path& path, std::uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (reads of a regular file ignore it).
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP) {  // O_NOFOLLOW met a symbolic link
      const std::optional<FileIdentity> identity = file_identity(path);
      if (!identity) return std::nullopt;  // removed since
      return FileBytes{{}, *identity, "a symbolic link, which is not followed"};
    }
    file_error("open", path, errno);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) file_error("stat", path, errno);
  FileBytes file;
  file.identity = identity_of(info);
  if (!S_ISREG(info.st_mode)) {
    file.unusable = S_ISDIR(info.st_mode) ? "a folder, not a file" : "not a regular file";
    return file;
  }
  const std::string too_large = "larger than the " + std::to_string(max_bytes) + " bytes it may hold";
  if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    file.unusable = too_large;
    return file;
  }
  file.bytes.resize(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  while (filled < file.bytes.size()) {
    std::size_t got =
        read_some(fd.get(), file.bytes.data() + filled, file.bytes.size() - filled, path);
    if (got == 0) break;  // shrank since fstat
    filled += got;
  }
  file.bytes.resize(filled);
  char extra[4096];  // grew since fstat: read the rest too
  while (std::size_t got = read_some(fd.get(), extra, sizeof extra, path)) {
    file.bytes.append(extra, got);
    if (file.bytes.size() > max_bytes) {
      file.bytes.clear();
      file.unusable = too_large;
      break;
    }
  }
  return file;
}

std::optional<FileIdentity> file_identity(const fs::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return std::nullopt;
  return identity_of(info);
}

void write_file_atomically(const fs::path& target, std::string_view bytes) {
  const fs::path folder = target.parent_path();
  const fs::path temp_path = folder / temp_file_name();
  Fd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) file_error("create", temp_path, errno);
  // Only a file this call created is its to remove (EEXIST above is another writer's).
  TempFile temp(temp_path);
  write_all(fd.get(), bytes, temp.path());
  if (::fsync(fd.get()) != 0) file_error("fsync", temp.path(), errno);
  // close can report a deferred write error (NFS, quotas): check it before publishing.
  if (fd.close_checked() != 0) file_error("close", temp.path(), errno);
  if (::rename(temp.path().c_str(), target.c_str()) != 0) {
    file_error("rename '" + temp.path().string() + "' onto", target, errno);
  }
  temp.commit();
  // The file is in place and whole whatever happens now: a failed sync of the folder only leaves
  // the rename less durable across a crash, so it is not the write's failure.
  try {
    fsync_folder(folder.empty() ? fs::path(".") : folder);
  } catch (const Error& error) {
    log().warn("'{}' is written, but {}; a crash now may lose it", target.string(), error.what());
  }
}

bool is_temp_file_name(std::string_view file_name) noexcept {
  return file_name.substr(0, kTempFilePrefix.size()) == kTempFilePrefix;
}

}  // namespace shardjit
