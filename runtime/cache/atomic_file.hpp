// Whole-file reads and atomic publication of files in the cache folder. A reader sees either no
// file or a complete one: writers fill a uniquely named temporary file in the same folder, fsync
// it, rename it over the target and fsync the folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "shardjit/error.hpp"

namespace shardjit {

// Error(kCacheError) from a failed file operation, naming the file and the system's reason. It
// keeps the errno, so that a caller can tell a full disk from a broken one without parsing text.
class FileError : public Error {
 public:
  FileError(const std::string& message, int system_error)
      : Error(ErrorCode::kCacheError, message), system_error_(system_error) {}
  int system_error() const noexcept { return system_error_; }
  // The file system or the user's quota had no room (ENOSPC, EDQUOT): freeing space may help.
  bool out_of_space() const noexcept;

 private:
  int system_error_;
};

// Which file a path named when it was read: a later rename over the path changes it.
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};

struct FileBytes {
  std::string bytes;
  FileIdentity identity;
  // Why the file cannot be this reader's data, when it cannot; `bytes` is then empty. Either it
  // holds more than the reader's limit (nothing is read: a damaged or planted file must not make
  // the reader allocate its size), or it is no regular file (a symbolic link, a folder, a FIFO:
  // none is followed, listed or waited on).
  std::string unusable;
};

// The whole file, or its identity and why it is unusable; nullopt when it does not exist. Any
// other failure is a FileError.
std::optional<FileBytes> read_whole_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// The identity of what path names now (without following a symlink); nullopt if nothing.
std::optional<FileIdentity> file_identity(const std::filesystem::path& path);

// Writes bytes to a temporary file next to target (mode 0600), fsyncs it, renames it onto target
// and fsyncs the folder. On any failure the temporary file is removed and a FileError names the
// file and the system's reason (e.g. "No space left on device"; out_of_space() tells that one).
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

// For tests only (no public header, setting or environment variable reaches it): the next `count`
// calls of write_file_atomically in this process fail at their first write(2) with errno `error`,
// after creating their temporary file, as a full disk would; a count of 0 cancels those left.
// Tests cannot fill a real disk, and a file size limit (RLIMIT_FSIZE) only ever gives EFBIG.
void fail_next_file_writes_for_testing(int count, int error);

// Temporary files are named ".tmp-<pid>-<16 random hex digits>".
inline constexpr std::string_view kTempFilePrefix = ".tmp-";
bool is_temp_file_name(std::string_view file_name) noexcept;

}  // namespace shardjit
