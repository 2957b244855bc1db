// The text of the kernel templates: the embedded copies, or a folder's (SHARDJIT_TEMPLATE_DIR)
// for kernel development. A template is handed to NVRTC flattened: every `#include "..."` of
// another template is inlined once, with #line markers so that compiler messages name the
// template file and line. The flattened text is also what the cache key hashes, so a change in
// any included file changes the key.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace shardjit {

class TemplateSources {
 public:
  static TemplateSources embedded();
  // Reads every *.cuh under folder. The folder, its subfolders and files must be owned by the
  // current user or root and writable by no one else (runtime/cache/trusted_folder.hpp): their
  // text becomes code on the GPU. Error(kInvalidArgument) naming what is refused and why.
  static TemplateSources from_folder(const std::filesystem::path& folder);

  // The template at `path` (relative to templates/) with its includes inlined.
  // Throws Error(kNotFound) for an unknown file or include.
  std::string flatten(const std::string& path) const;

  bool contains(const std::string& path) const { return files_.count(path) != 0; }
  const std::string& origin() const { return origin_; }  // "embedded" or the folder

 private:
  void append(const std::string& path, std::string& out, std::map<std::string, bool>& seen,
              int depth) const;
  std::map<std::string, std::string> files_;
  std::string origin_;
};

}  // namespace shardjit
