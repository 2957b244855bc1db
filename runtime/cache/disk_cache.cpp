#include "runtime/cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/cache_dir.hpp"
#include "runtime/cache/cache_key.hpp"
#include "runtime/cache/file_lock.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEntryExtension = ".sjk";
constexpr auto kStaleTempAge = std::chrono::hours(1);
// A store that finds the disk or the quota full frees this many times its entry's size before
// writing again. The entry's size alone would often do, but the freed space is not the store's
// alone (other writers on the disk, the file system's metadata and, copy-on-write, the unlinks
// themselves take some), and with one retry, falling short costs every later process a compile;
// the rest lets a run's next kernel fit at once. The excess costs a compile, if ever used again,
// of the least recently used entries.
constexpr std::uint64_t kRoomFactor = 2;

struct ScannedFile {
  fs::path path;
  std::uint64_t size = 0;
  fs::file_time_type mtime;
  bool regular = true;  // false: a symbolic link, folder or FIFO under an entry's name
};

struct KernelsScan {
  std::vector<ScannedFile> entries;  // *.sjk: regular files, and what else bears the name
  std::vector<ScannedFile> temps;    // .tmp-* regular files
};

// What kernels/ holds now. Files removed by another process during the scan are skipped; other
// files (not ours) are ignored. Something under an entry's name that is no regular file (copied
// in as a link, say) is listed, never followed, so that verify and gc can report and remove it.
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

// Removes a file (or an empty folder under an entry's name); a file already gone counts as
// removed. Failures are logged, not thrown: an eviction that fails must not fail the store or gc
// that asked for it.
bool remove_file(const fs::path& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return true;
  if (errno == EISDIR && ::rmdir(path.c_str()) == 0) return true;
  log().warn("cannot remove '{}' from the kernel cache: {}", path.string(), std::strerror(errno));
  return false;
}

// Removes the temporary files older than kStaleTempAge (their writers were interrupted); a newer
// one may belong to a writer at work. Returns how many went.
std::size_t remove_stale_temps(const std::vector<ScannedFile>& temps) {
  const auto now = fs::file_time_type::clock::now();
  std::size_t removed = 0;
  for (const ScannedFile& temp : temps) {
    if (now - temp.mtime > kStaleTempAge && remove_file(temp.path)) ++removed;
  }
  return removed;
}

void check_key(const std::string& key) {
  if (!is_cache_key(key)) {
    throw Error(ErrorCode::kInvalidArgument,
                "'" + key + "' is not a cache key; expected 64 lower-case hex characters");
  }
}

std::string unusable_entry(const FileBytes& file) { return "bad cache entry: " + file.unusable; }

// The entry stored at path, checked to hold the key its file name says; nullopt when the file
// disappeared. Error(kCacheError) with the reason when it is unusable.
std::optional<CacheEntry> read_entry_file(const fs::path& path) {
  auto file = read_whole_file(path, kMaxCacheEntryBytes);
  if (!file) return std::nullopt;
  if (!file->unusable.empty()) throw Error(ErrorCode::kCacheError, unusable_entry(*file));
  CacheEntry entry = decode_entry(file->bytes);
  std::string expected = path.stem().string();
  if (entry.key != expected) {
    throw Error(ErrorCode::kCacheError,
                "bad cache entry: holds key " + entry.key + " but is named for key " + expected);
  }
  return entry;
}

}  // namespace

DiskCache::DiskCache(fs::path dir, std::uint64_t max_bytes, bool writable,
                     std::chrono::milliseconds lock_timeout)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes),
      writable_(writable),
      lock_timeout_(lock_timeout) {
  prepare_cache_dir(dir_, writable_);
}

fs::path DiskCache::entry_path(const std::string& key) const {
  check_key(key);
  return cache_kernels_dir(dir_) / (key + std::string(kEntryExtension));
}

void DiskCache::require_writable(const char* action) const {
  if (writable_) return;
  throw Error(ErrorCode::kCacheError, std::string("cannot ") + action + ": the kernel cache '" +
                                          dir_.string() + "' is open read-only (cache-only mode)");
}

std::optional<CacheEntry> DiskCache::load(const std::string& key) {
  const fs::path path = entry_path(key);
  auto file = read_whole_file(path, kMaxCacheEntryBytes);
  if (!file) return std::nullopt;
  if (!file->unusable.empty()) return reject_entry(key, path, file->identity, unusable_entry(*file));
  CacheEntry entry;
  try {
    entry = decode_entry(file->bytes);
  } catch (const Error& error) {
    return reject_entry(key, path, file->identity, error.what());
  }
  if (entry.key != key) {
    return reject_entry(key, path, file->identity,
                        "bad cache entry: holds key " + entry.key + ", expected " + key);
  }
  // The modification time is the last use, for LRU eviction. Failing to touch only makes the
  // entry look older, so it is not an error.
  if (writable_ && ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) != 0) {
    log().debug("cannot mark '{}' as used: {}", path.string(), std::strerror(errno));
  }
  return entry;
}

std::optional<CacheEntry> DiskCache::reject_entry(const std::string& key, const fs::path& path,
                                                  const FileIdentity& identity,
                                                  const std::string& reason) {
  if (!writable_) {
    warn_once(key, "ignoring unusable kernel cache entry '" + path.string() + "' (" + reason +
                       "); the cache is read-only, so it stays until a writable run rebuilds it");
    return std::nullopt;
  }
  log().warn("removing unusable kernel cache entry '{}' ({}); it will be rebuilt", path.string(),
             reason);
  // Only remove the file that was read: another process may have renamed a good one into place.
  if (file_identity(path) == identity) remove_file(path);
  return std::nullopt;
}

void DiskCache::store(const CacheEntry& entry) {
  require_writable("store a kernel");
  const fs::path path = entry_path(entry.key);
  const std::string bytes = encode_entry(entry);
  try {
    write_file_atomically(path, bytes);
  } catch (const FileError& error) {
    if (!error.out_of_space()) throw;
    write_after_making_room(path, bytes, error);
  }
  try {
    evict_lru(max_bytes_, path);
  } catch (const Error& error) {
    log().warn("kernel cache eviction failed after storing '{}': {}", path.string(), error.what());
  }
}

void DiskCache::write_after_making_room(const fs::path& path, const std::string& bytes,
                                        const FileError& failure) {
  Eviction eviction;
  try {
    eviction = evict_lru(max_bytes_, path, kRoomFactor * bytes.size());
  } catch (const Error& error) {
    throw FileError(std::string(failure.what()) + "; no room could be made: " + error.what(),
                    failure.system_error());
  }
  const std::string evicted = std::to_string(eviction.entries) + " least recently used entries (" +
                              std::to_string(eviction.bytes_freed) + " bytes)";
  log().warn("kernel cache: no room to store '{}' ({}); evicted {} and writing it again",
             path.string(), failure.what(), evicted);
  try {
    write_file_atomically(path, bytes);
  } catch (const FileError& error) {
    throw FileError(std::string(error.what()) + ", even after evicting " + evicted +
                        " to make room for '" + path.string() + "'",
                    error.system_error());
  }
}

CacheEntry DiskCache::get_or_create(const std::string& key, const std::function<CacheEntry()>& make,
                                    bool* created) {
  if (created != nullptr) *created = false;
  if (auto hit = load(key)) return std::move(*hit);
  if (!writable_) {
    throw Error(ErrorCode::kCacheError,
                "the kernel cache '" + dir_.string() + "' has no entry for key " + key +
                    " and is read-only (cache-only mode); expected the entry to be made "
                    "beforehand by a run that may write the cache");
  }
  // The lock only saves duplicate work: where the file system cannot lock, or another process
  // holds the lock past the timeout (stopped, or a lock stuck on a network file system), this one
  // makes the entry without it; two processes may then both make it, and each publishes it whole
  // (write_file_atomically).
  std::optional<FileLock> lock;
  try {
    lock.emplace(cache_locks_dir(dir_) / (key + ".lock"), lock_timeout_);
  } catch (const LockUnavailable& error) {
    warn_once("lock", std::string("kernel cache: making kernels without their lock (") + error.what() +
                          "); processes may compile the same kernel at once");
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kCacheError) throw;
    warn_once("lock-timeout", std::string("kernel cache: making a kernel without its lock (") + error.what() +
                                  "); the process holding it may compile it too");
  }
  // Another process may have made it while this one waited for the lock.
  if (auto hit = load(key)) return std::move(*hit);
  CacheEntry entry = make();
  if (entry.key != key) {
    throw Error(ErrorCode::kInternal,
                "a kernel made for cache key " + key + " carries the key '" + entry.key + "'");
  }
  // A kernel that cannot be kept (a full disk, a quota) still serves this process.
  try {
    store(entry);
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kCacheError) throw;
    warn_once("store", std::string("kernel cache: cannot keep a kernel (") + error.what() +
                           "); it runs from memory, and later processes compile it again");
  }
  if (created != nullptr) *created = true;
  return entry;
}

void DiskCache::warn_once(const std::string& topic, const std::string& message) {
  std::lock_guard<std::mutex> guard(warned_mutex_);
  if (warned_keys_.insert(topic).second) log().warn("{}", message);
}

std::vector<DiskEntryInfo> DiskCache::list() const {
  std::vector<DiskEntryInfo> infos;
  for (const ScannedFile& file : scan_kernels(cache_kernels_dir(dir_)).entries) {
    DiskEntryInfo info;
    info.key = file.path.stem().string();
    info.size_bytes = file.size;
    info.last_use = file.mtime;
    info.path = file.path;
    try {
      auto entry = read_entry_file(file.path);
      if (!entry) continue;  // removed since the scan
      info.spec_text = std::move(entry->spec_text);
      info.arch = std::move(entry->arch);
    } catch (const Error& error) {
      info.spec_text = std::string("<unreadable: ") + error.what() + ">";
    }
    infos.push_back(std::move(info));
  }
  std::sort(infos.begin(), infos.end(),
            [](const DiskEntryInfo& a, const DiskEntryInfo& b) { return a.key < b.key; });
  return infos;
}

VerifyResult DiskCache::verify(bool remove_bad) {
  if (remove_bad) require_writable("remove bad entries");
  VerifyResult result;
  for (const ScannedFile& file : scan_kernels(cache_kernels_dir(dir_)).entries) {
    const std::optional<FileIdentity> seen = file_identity(file.path);
    try {
      if (read_entry_file(file.path)) ++result.ok;
    } catch (const Error& error) {
      result.bad.emplace_back(file.path, error.what());
      // Only what was there before the read: another process may have renamed a good entry in.
      if (remove_bad && seen && file_identity(file.path) == seen) remove_file(file.path);
    }
  }
  return result;
}

GcResult DiskCache::gc(std::uint64_t max_bytes) {
  require_writable("collect garbage");
  GcResult result;
  const Eviction eviction = evict_lru(max_bytes, fs::path());
  result.bytes_before = eviction.bytes_before;
  result.removed = eviction.entries;
  // tuning/ has its interrupted writers too (its records are the tuning store's, not gc's).
  result.removed_temp_files = eviction.temp_files + remove_stale_temps(scan_kernels(cache_tuning_dir(dir_)).temps);
  // Lock files whose key has no entry: left by evictions before lock files were removed with
  // their entries, or by compiles that failed.
  std::error_code error;
  for (fs::directory_iterator it(cache_locks_dir(dir_), error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    const fs::path& path = it->path();
    if (path.extension() != ".lock") continue;
    const std::string key = path.stem().string();
    std::error_code exists_error;
    if (!is_cache_key(key) || fs::exists(entry_path(key), exists_error) || exists_error) continue;
    if (remove_free_lock(key)) ++result.removed_lock_files;
  }
  result.bytes_after = total_bytes();
  return result;
}

bool DiskCache::remove_free_lock(const std::string& key) const {
  const fs::path path = cache_locks_dir(dir_) / (key + ".lock");
  std::error_code error;
  if (!fs::exists(path, error)) return false;
  try {
    FileLock lock(path, std::chrono::milliseconds(0));
    lock.remove_file();
    return true;
  } catch (const Error&) {
    return false;  // held: its key is being compiled, or the lock cannot be opened
  }
}

std::uint64_t DiskCache::total_bytes() const {
  return sum_sizes(scan_kernels(cache_kernels_dir(dir_)).entries);
}

DiskCache::Eviction DiskCache::evict_lru(std::uint64_t max_bytes, const fs::path& keep,
                                         std::uint64_t min_freed) {
  Eviction eviction;
  KernelsScan scan = scan_kernels(cache_kernels_dir(dir_));
  eviction.temp_files = remove_stale_temps(scan.temps);
  // What bears an entry's name but is no file can never load, and a store cannot rename over a
  // folder: it goes whatever the cap.
  std::vector<ScannedFile> entries;
  for (ScannedFile& file : scan.entries) {
    if (file.regular) {
      entries.push_back(std::move(file));
    } else if (remove_file(file.path)) {
      log().info("removed '{}' from the kernel cache: not a regular file", file.path.string());
      ++eviction.entries;
    }
  }
  std::uint64_t total = sum_sizes(entries);
  eviction.bytes_before = total;
  auto done = [&] { return total <= max_bytes && eviction.bytes_freed >= min_freed; };
  if (done()) return eviction;
  std::sort(entries.begin(), entries.end(), [](const ScannedFile& a, const ScannedFile& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.path < b.path;
  });
  for (const ScannedFile& file : entries) {
    if (done()) break;
    if (!keep.empty() && file.path.filename() == keep.filename()) continue;
    if (!remove_file(file.path)) continue;
    remove_free_lock(file.path.stem().string());
    if (eviction.bytes_freed < min_freed) {
      log().info("evicted kernel cache entry '{}' ({} bytes) to free {} bytes for a new entry",
                 file.path.string(), file.size, min_freed);
    } else {
      log().info("evicted kernel cache entry '{}' ({} bytes) to keep the cache under {} bytes",
                 file.path.string(), file.size, max_bytes);
    }
    total -= file.size;
    eviction.bytes_freed += file.size;
    ++eviction.entries;
  }
  return eviction;
}

}  // namespace shardjit
