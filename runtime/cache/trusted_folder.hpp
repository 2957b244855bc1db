// The rule for folders whose files become code on the GPU: the kernel cache, the template folder
// (SHARDJIT_TEMPLATE_DIR) and the dump folder (SHARDJIT_DUMP_DIR). Such a folder must be owned by
// the current user or root and writable by no one else; otherwise another local user could plant
// code, or links that make shardjit overwrite files of the victim's.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "shardjit/error.hpp"

namespace shardjit {

// A folder (or a file in it) refused by the rule, or a path that cannot be used as one. A type of
// its own so that the command line tool can report it as a usage error (exit 2): nothing was done.
class FolderRefused : public Error {
 public:
  using Error::Error;
};

// Error(kInvalidArgument) naming `what` when `text` holds a NUL byte: the system would cut the
// path there and use another file than the one named.
void check_path_text(const std::string& text, const std::string& what);

// Throws FolderRefused(code) when `info` (the stat of path) shows a file or folder owned by a
// user other than the current effective user or root, or writable by its group or by others.
// `label` names it in the message, e.g. "cache folder" or "template file".
void check_owner_and_mode(const std::filesystem::path& path, const struct stat& info, const std::string& label,
                          ErrorCode code);

// Checks (and, when need_write, creates with mode 0700, parents too) a folder by the rule above:
// a path that is not a folder, another user's folder and one writable by group or others are
// refused with FolderRefused(code) naming `label`, the path, what is wrong and what is expected.
// A symlink is followed; the link itself must be owned by the current user or root. need_write
// also requires that the current user can write it. Without need_write nothing is created, and
// false means the folder does not exist.
bool prepare_trusted_folder(const std::filesystem::path& path, bool need_write, const std::string& label,
                            ErrorCode code);

}  // namespace shardjit
