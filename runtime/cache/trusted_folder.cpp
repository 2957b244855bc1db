#include "runtime/cache/trusted_folder.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace shardjit {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool trusted_owner(uid_t owner) { return owner == geteuid() || owner == 0; }

[[noreturn]] void refuse_errno(const std::string& what, const std::string& label, const fs::path& path, int error,
                               ErrorCode code) {
  throw FolderRefused(code, "cannot " + what + " " + label + " " + quoted(path) + ": " + std::strerror(error));
}

void check_owner(const fs::path& path, uid_t owner, const std::string& label, ErrorCode code) {
  if (trusted_owner(owner)) return;
  throw FolderRefused(code, label + " " + quoted(path) + " is owned by uid " + std::to_string(owner) +
                                ", not by the current user (uid " + std::to_string(geteuid()) +
                                ") or root; what it holds runs as code on the GPU, so another user's is not "
                                "trusted. Expected one of your own (chown it, or use another folder)");
}

// The rules for an existing path: a folder (after following one symlink level through stat),
// owned by us or root, not writable by group or others.
void check_existing(const fs::path& path, const struct stat& link_info, const std::string& label, ErrorCode code) {
  struct stat info = link_info;
  if (S_ISLNK(link_info.st_mode)) {
    check_owner(path, link_info.st_uid, label + " symlink", code);
    if (::stat(path.c_str(), &info) != 0) refuse_errno("follow the symlink of", label, path, errno, code);
  }
  if (!S_ISDIR(info.st_mode)) {
    throw FolderRefused(code, label + " " + quoted(path) +
                                  " is not a folder; expected a folder (or a path where one can be created)");
  }
  check_owner_and_mode(path, info, label, code);
}

// Creates path and any missing parents, each with mode 0700. Another process creating the same
// folder at the same time is fine.
void create_folders(const fs::path& path, const std::string& label, ErrorCode code) {
  fs::path partial;
  for (const fs::path& part : path) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      // mkdir applies the umask; make the mode exactly 0700 whatever the umask was.
      if (::chmod(partial.c_str(), 0700) != 0) refuse_errno("set the mode of", label, partial, errno, code);
    } else if (errno != EEXIST) {
      refuse_errno("create", label, partial, errno, code);
    }
  }
}

}  // namespace

void check_path_text(const std::string& text, const std::string& what) {
  if (text.find('\0') == std::string::npos) return;
  throw Error(ErrorCode::kInvalidArgument,
              what + " holds a NUL byte (at offset " + std::to_string(text.find('\0')) +
                  "), where the system would cut the path short and use another file; expected a path "
                  "without NUL bytes");
}

void check_owner_and_mode(const fs::path& path, const struct stat& info, const std::string& label, ErrorCode code) {
  check_owner(path, info.st_uid, label, code);
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) == 0) return;
  const bool folder = S_ISDIR(info.st_mode);
  throw FolderRefused(code, label + " " + quoted(path) + " is writable by " +
                                ((info.st_mode & S_IWOTH) != 0 ? "others" : "its group") + " (mode " +
                                octal_mode(info.st_mode) +
                                "); what it holds runs as code on the GPU, so only its owner may write it. "
                                "Expected mode " +
                                (folder ? "0700: run `chmod 700 " : "0600 or 0644: run `chmod go-w ") +
                                path.string() + "`");
}

bool prepare_trusted_folder(const fs::path& path, bool need_write, const std::string& label, ErrorCode code) {
  check_path_text(path.string(), label);
  if (path.empty()) throw FolderRefused(code, "the " + label + " path is empty; expected a folder path");
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error != ENOENT) refuse_errno("inspect", label, path, error, code);
    if (!need_write) return false;
    create_folders(path, label, code);
    if (::lstat(path.c_str(), &info) != 0) refuse_errno("inspect", label, path, errno, code);
  }
  check_existing(path, info, label, code);
  if (need_write && ::access(path.c_str(), W_OK | X_OK) != 0) {
    throw FolderRefused(code, label + " " + quoted(path) + " is not writable by the current user (" +
                                  std::strerror(errno) + "); expected a folder you can write");
  }
  return true;
}

}  // namespace shardjit
