#include "runtime/cache/cache_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "shardjit/error.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

[[noreturn]] void refuse(const std::string& message) {
  throw Error(ErrorCode::kCacheError, message);
}

[[noreturn]] void refuse_errno(const std::string& what, const fs::path& path, int error) {
  refuse("cannot " + what + " cache folder " + quoted(path) + ": " + std::strerror(error));
}

bool trusted_owner(uid_t owner) { return owner == geteuid() || owner == 0; }

void check_owner(const fs::path& path, uid_t owner, const char* what) {
  if (trusted_owner(owner)) return;
  refuse(std::string(what) + " " + quoted(path) + " is owned by uid " + std::to_string(owner) +
         ", not by the current user (uid " + std::to_string(geteuid()) +
         ") or root; its entries run as code on the GPU, so another user's folder is not trusted. "
         "Expected a folder of your own (chown it, or use another cache folder)");
}

// The rules for an existing path: a folder (after following one symlink level through stat),
// owned by us or root, not writable by group or others.
void check_existing(const fs::path& path, const struct stat& link_info) {
  struct stat info = link_info;
  if (S_ISLNK(link_info.st_mode)) {
    check_owner(path, link_info.st_uid, "cache folder symlink");
    if (::stat(path.c_str(), &info) != 0) refuse_errno("follow the symlink of", path, errno);
  }
  if (!S_ISDIR(info.st_mode)) {
    refuse("cache folder " + quoted(path) +
           " is not a folder; expected a folder (or a path where one can be created)");
  }
  check_owner(path, info.st_uid, "cache folder");
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    refuse("cache folder " + quoted(path) + " is writable by " +
           ((info.st_mode & S_IWOTH) != 0 ? "others" : "its group") + " (mode " +
           octal_mode(info.st_mode) +
           "); its entries run as code on the GPU, so only its owner may write it. "
           "Expected mode 0700: run `chmod 700 " +
           path.string() + "`");
  }
}

// Creates path and any missing parents, each with mode 0700. Another process creating the same
// folder at the same time is fine.
void create_folders(const fs::path& path) {
  fs::path partial;
  for (const fs::path& part : path) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      // mkdir applies the umask; make the mode exactly 0700 whatever the umask was.
      if (::chmod(partial.c_str(), 0700) != 0) refuse_errno("set the mode of", partial, errno);
    } else if (errno != EEXIST) {
      refuse_errno("create", partial, errno);
    }
  }
}

// False when a read-only folder does not exist (nothing to check).
bool prepare_one(const fs::path& path, bool need_write) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    int error = errno;
    if (error != ENOENT) refuse_errno("inspect", path, error);
    // A read-only cache that does not exist is an empty cache: every lookup misses, and the
    // layer above says which command would fill it.
    if (!need_write) return false;
    create_folders(path);
    if (::lstat(path.c_str(), &info) != 0) refuse_errno("inspect", path, errno);
  }
  check_existing(path, info);
  if (need_write && ::access(path.c_str(), W_OK | X_OK) != 0) {
    refuse("cache folder " + quoted(path) + " is not writable by the current user (" +
           std::strerror(errno) + "); expected a folder you can write, or cache-only mode");
  }
  return true;
}

}  // namespace

fs::path cache_kernels_dir(const fs::path& dir) { return dir / "kernels"; }
fs::path cache_locks_dir(const fs::path& dir) { return dir / "locks"; }
fs::path cache_tuning_dir(const fs::path& dir) { return dir / "tuning"; }

void prepare_cache_dir(const fs::path& dir, bool need_write) {
  if (dir.empty()) refuse("the cache folder path is empty; expected a folder path");
  if (!prepare_one(dir, need_write)) return;
  if (need_write) {
    prepare_one(cache_kernels_dir(dir), true);
    prepare_one(cache_locks_dir(dir), true);
    prepare_one(cache_tuning_dir(dir), true);
    return;
  }
  // Cache-only: kernels/ and tuning/ may be missing (an empty cache), but if present they obey
  // the same rules.
  for (const fs::path& sub : {cache_kernels_dir(dir), cache_tuning_dir(dir)}) {
    struct stat info {};
    if (::lstat(sub.c_str(), &info) == 0) check_existing(sub, info);
  }
}

}  // namespace shardjit
