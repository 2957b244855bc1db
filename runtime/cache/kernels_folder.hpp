// The files of a cache's kernels/ folder as the disk cache sees them: a scan that never follows
// what bears an entry's name, the reading of one entry with its checks, and removal that says why
// it failed. Shared by the store path (eviction) and the maintenance commands (list, verify, gc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cache/entry_format.hpp"

namespace shardjit {

inline constexpr std::string_view kEntryExtension = ".sjk";

struct ScannedFile {
  std::filesystem::path path;
  std::uint64_t size = 0;
  std::filesystem::file_time_type mtime;
  bool regular = true;  // false: a symbolic link, folder or FIFO under an entry's name
};

struct KernelsScan {
  std::vector<ScannedFile> entries;  // *.sjk: regular files, and what else bears the name
  std::vector<ScannedFile> temps;    // .tmp-* regular files
};

// What kernels/ holds now (empty when it does not exist). Files removed by another process during
// the scan are skipped; files of other names are ignored. Something under an entry's name that is
// no regular file is listed, never followed, so that verify and gc can report and remove it.
KernelsScan scan_kernels(const std::filesystem::path& kernels);

std::uint64_t sum_sizes(const std::vector<ScannedFile>& files);

// The entry stored at path, checked to hold the key its file name says; nullopt when the file
// does not exist. Error(kCacheError) with the reason when it is unusable (a FileError when it
// cannot be read).
std::optional<CacheEntry> read_entry_file(const std::filesystem::path& path);

// Removes a file (or an empty folder under an entry's name); a file already gone counts as
// removed. Returns "" when removed, else why not (also logged: warn). Never throws: an eviction
// that fails must not fail the store or gc that asked for it.
std::string remove_cache_file(const std::filesystem::path& path);

// Removes the temporary files older than an hour (their writers were interrupted); a newer one may
// belong to a writer at work. Returns how many went.
std::size_t remove_stale_temps(const std::vector<ScannedFile>& temps);

}  // namespace shardjit
