// The safety rules of the cache folder. Cache entries are code that runs on the GPU, so a folder
// that another user can write (or owns) is refused rather than trusted.
#pragma once

#include <filesystem>

namespace shardjit {

// Checks (and, when need_write, creates) a cache folder with its subfolders kernels/, locks/ and
// tuning/.
//
// need_write: missing folders (and their missing parents) are created with mode 0700, and the
// folder must be writable by the current user. Without need_write (cache-only mode) nothing is
// created, a read-only folder is fine, and a missing folder is an empty cache.
//
// Refused with FolderRefused(kCacheError) (runtime/cache/trusted_folder.hpp), naming the folder,
// what is wrong and what is expected: a path that is not a folder or holds a NUL byte; a folder
// writable by its group or by others; a folder owned by a user other than the current effective
// user or root; with need_write, a folder the current user cannot write. A symlink is followed;
// the link itself must be owned by the current user or root, and its target must pass the same
// checks.
void prepare_cache_dir(const std::filesystem::path& dir, bool need_write);

// The folder of the entries, the folder of the per-key lock files and the folder of the tuning
// records (runtime/cache/tuning_store.hpp).
std::filesystem::path cache_kernels_dir(const std::filesystem::path& dir);
std::filesystem::path cache_locks_dir(const std::filesystem::path& dir);
std::filesystem::path cache_tuning_dir(const std::filesystem::path& dir);

}  // namespace shardjit
