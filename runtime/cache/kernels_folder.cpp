#include "runtime/cache/kernels_folder.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

constexpr auto kStaleTempAge = std::chrono::hours(1);

}  // namespace

KernelsScan scan_kernels(const fs::path& kernels) {
  KernelsScan scan;
  std::error_code error;
  fs::directory_iterator it(kernels, error);
  if (error == std::errc::no_such_file_or_directory) return scan;
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    const fs::path& path = it->path();
    std::string name = path.filename().string();
    bool temp = is_temp_file_name(name);
    if (!temp && path.extension() != kEntryExtension) continue;
    std::error_code stat_error;
    const fs::file_status status = it->symlink_status(stat_error);
    if (stat_error) continue;
    if (!fs::is_regular_file(status)) {
      // Its own times are not read (that would follow a link): listed as seen now.
      if (!temp) scan.entries.push_back({path, 0, fs::file_time_type::clock::now(), false});
      continue;
    }
    ScannedFile file{path, fs::file_size(path, stat_error), {}};
    if (stat_error) continue;
    file.mtime = fs::last_write_time(path, stat_error);
    if (stat_error) continue;
    (temp ? scan.temps : scan.entries).push_back(std::move(file));
  }
  if (error) {
    throw Error(ErrorCode::kCacheError,
                "cannot list cache folder '" + kernels.string() + "': " + error.message());
  }
  return scan;
}

std::uint64_t sum_sizes(const std::vector<ScannedFile>& files) {
  std::uint64_t total = 0;
  for (const ScannedFile& file : files) total += file.size;
  return total;
}

std::optional<CacheEntry> read_entry_file(const fs::path& path) {
  auto file = read_whole_file(path, kMaxCacheEntryBytes);
  if (!file) return std::nullopt;
  if (!file->unusable.empty()) throw Error(ErrorCode::kCacheError, "bad cache entry: " + file->unusable);
  CacheEntry entry = decode_entry(file->bytes);
  std::string expected = path.stem().string();
  if (entry.key != expected) {
    throw Error(ErrorCode::kCacheError,
                "bad cache entry: holds key " + entry.key + " but is named for key " + expected);
  }
  return entry;
}

std::string remove_cache_file(const fs::path& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return "";
  if (errno == EISDIR && ::rmdir(path.c_str()) == 0) return "";
  const std::string reason = std::strerror(errno);
  log().warn("cannot remove '{}' from the kernel cache: {}", path.string(), reason);
  return reason;
}

std::size_t remove_stale_temps(const std::vector<ScannedFile>& temps) {
  const auto now = fs::file_time_type::clock::now();
  std::size_t removed = 0;
  for (const ScannedFile& temp : temps) {
    if (now - temp.mtime > kStaleTempAge && remove_cache_file(temp.path).empty()) ++removed;
  }
  return removed;
}

}  // namespace shardjit
