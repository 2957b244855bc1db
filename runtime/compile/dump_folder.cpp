#include "runtime/compile/dump_folder.hpp"

#include <map>
#include <mutex>
#include <set>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/trusted_folder.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

std::mutex& state_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Folders checked so far, and whether each was accepted.
std::map<std::string, bool>& checked_folders() {
  static std::map<std::string, bool> folders;
  return folders;
}

// Folders whose write failure has been warned about.
std::set<std::string>& write_warned() {
  static std::set<std::string> folders;
  return folders;
}

}  // namespace

bool dump_folder_usable(const std::string& folder) {
  std::lock_guard<std::mutex> lock(state_mutex());
  auto found = checked_folders().find(folder);
  if (found != checked_folders().end()) return found->second;
  bool usable = false;
  try {
    usable = prepare_trusted_folder(folder, true, "dump folder (SHARDJIT_DUMP_DIR)", ErrorCode::kInvalidArgument);
  } catch (const Error& error) {
    log().warn("not dumping compiled kernels: {}; compiles go on without dumps", error.what());
  }
  checked_folders().emplace(folder, usable);
  return usable;
}

void write_dump_file(const std::string& folder, const std::filesystem::path& path, std::string_view bytes) {
  try {
    write_file_atomically(path, bytes);
  } catch (const Error& error) {
    std::lock_guard<std::mutex> lock(state_mutex());
    if (write_warned().insert(folder).second) {
      log().warn("cannot write a dump file into the dump folder (SHARDJIT_DUMP_DIR) '{}': {}; compiles go on",
                 folder, error.what());
    }
  }
}

}  // namespace shardjit
