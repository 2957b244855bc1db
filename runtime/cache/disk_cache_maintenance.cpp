// DiskCache's maintenance: list, verify and gc (the `shardjit ls`, `verify` and `gc` commands).
// The store path is in disk_cache.cpp.
#include <algorithm>
#include <system_error>

#include "runtime/cache/cache_dir.hpp"
#include "runtime/cache/cache_key.hpp"
#include "runtime/cache/disk_cache.hpp"
#include "runtime/cache/kernels_folder.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

namespace fs = std::filesystem;

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
      if (!remove_bad) continue;
      // Only what was there before the read: another process may have renamed a good entry in.
      std::string not_removed = "replaced by another process since it was read, so left in place";
      if (seen && file_identity(file.path) == seen) not_removed = remove_cache_file(file.path);
      if (!not_removed.empty()) result.not_removed.emplace_back(file.path, not_removed);
    }
  }
  return result;
}

GcResult DiskCache::gc(std::uint64_t max_bytes) {
  require_writable("collect garbage");
  GcResult result;
  // Bad entries first: they can never load, whatever the cap.
  const VerifyResult verified = verify(true);
  result.removed_bad = verified.bad.size() - verified.not_removed.size();
  result.not_removed = verified.not_removed;
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

}  // namespace shardjit
