// The dump folder (SHARDJIT_DUMP_DIR, RuntimeOptions::dump_dir): where every compile leaves its
// specialized source, NVRTC log, PTX and CUBIN for kernel development and bug reports. It obeys
// the cache folder's rule (runtime/cache/trusted_folder.hpp: owned by the current user or root,
// writable by no one else, created 0700), and its files are published like cache entries, by a
// temporary file renamed into place, so that a link planted under a dump file's name is replaced,
// never followed. Dumping never fails a compile: a refused or unusable folder, or a file that
// cannot be written, is one warning per folder and process, and the compile goes on.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace shardjit {

// Whether `folder` may take dump files: checked (and created) once per folder and process; false,
// after one warning that says why, when it is refused or cannot be created.
bool dump_folder_usable(const std::string& folder);

// Writes one dump file of `folder` atomically (see above); a failure is warned about once per
// folder and process.
void write_dump_file(const std::string& folder, const std::filesystem::path& path, std::string_view bytes);

}  // namespace shardjit
