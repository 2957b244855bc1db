#include "runtime/cache/cache_dir.hpp"

#include <sys/stat.h>

#include "runtime/cache/trusted_folder.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLabel = "cache folder";

}  // namespace

fs::path cache_kernels_dir(const fs::path& dir) { return dir / "kernels"; }
fs::path cache_locks_dir(const fs::path& dir) { return dir / "locks"; }
fs::path cache_tuning_dir(const fs::path& dir) { return dir / "tuning"; }

void prepare_cache_dir(const fs::path& dir, bool need_write) {
  // A read-only cache that does not exist is an empty cache: every lookup misses, and the layer
  // above says which command would fill it.
  if (!prepare_trusted_folder(dir, need_write, kLabel, ErrorCode::kCacheError)) return;
  if (need_write) {
    prepare_trusted_folder(cache_kernels_dir(dir), true, kLabel, ErrorCode::kCacheError);
    prepare_trusted_folder(cache_locks_dir(dir), true, kLabel, ErrorCode::kCacheError);
    prepare_trusted_folder(cache_tuning_dir(dir), true, kLabel, ErrorCode::kCacheError);
    return;
  }
  // Cache-only: kernels/ and tuning/ may be missing (an empty cache), or closed to this user (a
  // reader then finds nothing in them), but where they can be seen they obey the same rules.
  for (const fs::path& sub : {cache_kernels_dir(dir), cache_tuning_dir(dir)}) {
    struct stat info {};
    if (::lstat(sub.c_str(), &info) == 0) prepare_trusted_folder(sub, false, kLabel, ErrorCode::kCacheError);
  }
}

}  // namespace shardjit
