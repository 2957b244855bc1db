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
#include "runtime/cache/kernels_folder.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

// A store that finds the disk or the quota full frees this many times its entry's size before
// writing again. The entry's size alone would often do, but the freed space is not the store's
// alone (other writers on the disk, the file system's metadata and, copy-on-write, the unlinks
// themselves take some), and with one retry, falling short costs every later process a compile;
// the rest lets a run's next kernel fit at once. The excess costs a compile, if ever used again,
// of the least recently used entries.
constexpr std::uint64_t kRoomFactor = 2;

void check_key(const std::string& key) {
  if (!is_cache_key(key)) {
    throw Error(ErrorCode::kInvalidArgument,
                "'" + key + "' is not a cache key; expected 64 lower-case hex characters");
  }
}

std::string unusable_entry(const FileBytes& file) { return "bad cache entry: " + file.unusable; }

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
  std::optional<FileBytes> file;
  try {
    file = read_whole_file(path, kMaxCacheEntryBytes);
  } catch (const FileError& error) {
    // A folder this user may not read (another user's 0700 cache it can reach, an entry made
    // by root): as good as missing, so that JIT builds the kernel into memory.
    warn_once("read", std::string("kernel cache: cannot read an entry (") + error.what() +
                          "); such kernels are treated as missing from the cache");
    return std::nullopt;
  }
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
  if (file_identity(path) == identity) remove_cache_file(path);
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
  {
    std::lock_guard<std::mutex> guard(lost_mutex_);
    lost_.erase(entry.key);
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
    note_lost(key, std::string("it could not be stored (") + error.what() + ")");
    warn_once("store", std::string("kernel cache: cannot keep a kernel (") + error.what() +
                           "); it runs from memory, and later processes compile it again");
  }
  if (created != nullptr) *created = true;
  return entry;
}

void DiskCache::note_lost(const std::string& key, const std::string& reason) {
  std::lock_guard<std::mutex> guard(lost_mutex_);
  lost_[key] = reason;
}

std::optional<std::string> DiskCache::entry_problem(const std::string& key) {
  const fs::path path = entry_path(key);
  std::string problem;
  try {
    if (read_entry_file(path)) return std::nullopt;
    problem = "not in the cache folder";
  } catch (const Error& error) {
    problem = "its entry '" + path.string() + "' does not verify (" + error.what() + ")";
  }
  std::lock_guard<std::mutex> guard(lost_mutex_);
  const auto found = lost_.find(key);
  if (found != lost_.end()) return problem + ": " + found->second;
  if (!writable_) {
    return problem + ": the cache folder '" + dir_.string() +
           "' is not writable by this user, so kernels missing from it are built into memory only";
  }
  return problem + ": this process stored it, then another process removed it (a `shardjit gc`, "
                   "`shardjit verify --remove`, or an eviction under that process's size cap)";
}

void DiskCache::warn_once(const std::string& topic, const std::string& message) {
  std::lock_guard<std::mutex> guard(warned_mutex_);
  if (warned_keys_.insert(topic).second) log().warn("{}", message);
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
    } else if (remove_cache_file(file.path).empty()) {
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
    if (!remove_cache_file(file.path).empty()) continue;
    remove_free_lock(file.path.stem().string());
    const std::string key = file.path.stem().string();
    if (eviction.bytes_freed < min_freed) {
      note_lost(key, "evicted to make room for a later kernel on a full disk or quota (" + std::to_string(min_freed) +
                         " bytes were needed); free space on the cache's file system");
      log().info("evicted kernel cache entry '{}' ({} bytes) to free {} bytes for a new entry",
                 file.path.string(), file.size, min_freed);
    } else {
      note_lost(key, "evicted by the cache's size cap of " + std::to_string(max_bytes) +
                         " bytes (SHARDJIT_CACHE_MAX_BYTES, RuntimeOptions::cache_max_bytes, gc --max-size) to "
                         "make room for later kernels; raise the cap");
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
