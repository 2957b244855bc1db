// The on-disk kernel cache: one content-addressed file per compiled kernel, shared by every
// process of a user.
//
//   <dir>/kernels/<key>.sjk   one entry (format: entry_format.hpp), published by atomic rename
//   <dir>/kernels/.tmp-*      an entry being written (or left by a crash; gc removes it)
//   <dir>/locks/<key>.lock    per-key flock, so that concurrent processes compile a key once
//
// The modification time of an entry is its last use: a hit touches it, and eviction removes the
// least recently used entries first. Sizes and totals count entries only (not temporary files).
// A DiskCache may be used from several threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/entry_format.hpp"
#include "runtime/cache/file_lock.hpp"

namespace shardjit {

struct DiskEntryInfo {
  std::string key;
  std::string spec_text;  // "<unreadable: reason>" for an entry that does not decode
  std::string arch;
  std::uint64_t size_bytes = 0;
  std::filesystem::file_time_type last_use;
  std::filesystem::path path;
};

struct VerifyResult {
  std::size_t ok = 0;
  std::vector<std::pair<std::filesystem::path, std::string>> bad;  // path, reason
  // With remove_bad: the bad entries that are still there, and why (a folder that is not empty,
  // an immutable file, a replacement by another process).
  std::vector<std::pair<std::filesystem::path, std::string>> not_removed;
};

struct GcResult {
  std::size_t removed_bad = 0;         // entries that did not verify, removed
  std::vector<std::pair<std::filesystem::path, std::string>> not_removed;  // bad ones left, and why
  std::size_t removed = 0;             // entries evicted
  std::size_t removed_temp_files = 0;  // stale temporary files (older than an hour) removed
  std::size_t removed_lock_files = 0;  // lock files of keys without an entry, not held
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;
};

class DiskCache {
 public:
  // Checks (and when writable, creates) the folder: see prepare_cache_dir. max_bytes caps the
  // total size of the entries (UINT64_MAX: no cap); the entry just stored is never evicted.
  // lock_timeout bounds the wait for another process compiling the same key.
  DiskCache(std::filesystem::path dir, std::uint64_t max_bytes, bool writable,
            std::chrono::milliseconds lock_timeout = FileLock::kDefaultTimeout);
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  bool writable() const { return writable_; }
  std::uint64_t max_bytes() const { return max_bytes_; }
  std::filesystem::path entry_path(const std::string& key) const;

  // The entry of key, or nullopt when there is none. An entry that does not decode or holds
  // another key is logged (warn), removed when writable, and reported as absent, so that the
  // caller rebuilds it. An entry this user cannot read (another user's 0700 folder) is absent too,
  // warned once. A hit marks the entry as used (when writable).
  std::optional<CacheEntry> load(const std::string& key);

  // Publishes entry atomically as kernels/<entry.key>.sjk, then evicts least recently used
  // entries (and their lock files) while the total exceeds the cap, and removes temporary files
  // older than an hour. Where the disk or the quota is full (ENOSPC, EDQUOT), the cache's own
  // least recently used entries (never this one) make room first: enough are evicted to free
  // twice the entry's size (logged: warn), and the write is tried once more. Error(kCacheError)
  // when the cache is read-only or a write fails (another error, or no room even then), naming
  // the file and the reason (a FileError when the write failed); nothing partial is left behind.
  void store(const CacheEntry& entry);

  // Compiles a key once across processes: takes locks/<key>.lock, loads again, else calls
  // make(), stores and returns its result. *created tells whether make() ran here. A read-only
  // cache only loads; a missing entry is an Error(kCacheError) saying the folder is read-only.
  // Exceptions from make() propagate; the lock is released and nothing is stored. Where no lock
  // can be taken (LockUnavailable), or another process holds it past lock_timeout, it makes the
  // entry without one, and where the entry cannot be stored it returns it all the same: each
  // logged (warn) once per cache, since neither loses anything but time.
  CacheEntry get_or_create(const std::string& key, const std::function<CacheEntry()>& make,
                           bool* created = nullptr);

  // Whether key's entry is in the folder and verifies: nullopt when it does, else what is wrong
  // and why, as far as this process knows: it could not be stored (the error), this process
  // evicted it (the size cap, or a full disk), the folder is read-only, or another process
  // removed it.
  std::optional<std::string> entry_problem(const std::string& key);

  // Every entry (temporary files skipped), sorted by key.
  std::vector<DiskEntryInfo> list() const;

  // Decodes every *.sjk file of kernels/ (whatever its name); remove_bad removes those that fail
  // (needs a writable cache) and reports those it could not remove.
  VerifyResult verify(bool remove_bad);

  // Removes the entries that do not verify (as verify(true) does: it reads every entry), evicts
  // least recently used entries until their total is at most max_bytes, and removes temporary
  // files older than an hour (left by crashed writers) and the lock files of keys that have no
  // entry, unless held. Needs a writable cache.
  GcResult gc(std::uint64_t max_bytes);

  std::uint64_t total_bytes() const;

 private:
  void require_writable(const char* action) const;
  // Logs message as a warning the first time for topic (a bad key, or a kind of failure), then not.
  void warn_once(const std::string& topic, const std::string& message);
  std::optional<CacheEntry> reject_entry(const std::string& key, const std::filesystem::path& path,
                                         const FileIdentity& identity, const std::string& reason);
  // What evict_lru did, from its one scan of the kernels folder.
  struct Eviction {
    std::size_t entries = 0;        // evicted
    std::size_t temp_files = 0;     // stale temporary files removed
    std::uint64_t bytes_before = 0;  // the entries' total when scanned
    std::uint64_t bytes_freed = 0;   // the evicted entries' total
  };
  // Evicts least recently used entries (never `keep`) while their total exceeds max_bytes or
  // fewer than min_freed bytes have gone, and removes stale temporary files, as gc and store say.
  Eviction evict_lru(std::uint64_t max_bytes, const std::filesystem::path& keep,
                     std::uint64_t min_freed = 0);
  // store's second write, after the first found no room (failure): evicts to make room, then
  // writes again, or throws a FileError saying what was evicted in vain.
  void write_after_making_room(const std::filesystem::path& path, const std::string& bytes,
                               const FileError& failure);
  // Records why key's entry is gone (for entry_problem).
  void note_lost(const std::string& key, const std::string& reason);
  // Deletes the lock file of `key` when no one holds it; false when held or absent.
  bool remove_free_lock(const std::string& key) const;

  std::filesystem::path dir_;
  std::uint64_t max_bytes_;
  bool writable_;
  std::chrono::milliseconds lock_timeout_;
  std::mutex warned_mutex_;
  std::set<std::string> warned_keys_;  // warn_once's topics
  std::mutex lost_mutex_;
  std::map<std::string, std::string> lost_;  // key -> why this process lost its entry
};

}  // namespace shardjit
