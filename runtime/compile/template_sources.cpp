#include "runtime/compile/template_sources.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "runtime/cache/trusted_folder.hpp"
#include "runtime/compile/embedded_templates.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// `#include "x"` -> x; anything else -> empty. Angle-bracket includes are left alone: templates
// must not have any, and NVRTC will say so if one slips in.
std::string quoted_include(const std::string& line) {
  std::size_t pos = line.find_first_not_of(" \t");
  if (pos == std::string::npos || line.compare(pos, 8, "#include") != 0) return {};
  std::size_t open = line.find('"', pos + 8);
  if (open == std::string::npos) return {};
  std::size_t close = line.find('"', open + 1);
  if (close == std::string::npos) return {};
  return line.substr(open + 1, close - open - 1);
}

constexpr const char* kFolderLabel = "template folder (SHARDJIT_TEMPLATE_DIR)";

// A template becomes code on the GPU, so every folder and file of the template folder obeys the
// cache folder's rule; a link must be the current user's or root's, and so must what it names.
void check_trusted_entry(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return;  // gone since listed: not read either
  if (S_ISLNK(info.st_mode)) {
    // A link's own mode bits mean nothing (always 0777): only its owner counts.
    struct stat link = info;
    link.st_mode &= ~static_cast<mode_t>(S_IWGRP | S_IWOTH);
    check_owner_and_mode(path, link, "template folder symlink", ErrorCode::kInvalidArgument);
    if (::stat(path.c_str(), &info) != 0) return;  // a dangling link names nothing to read
  }
  check_owner_and_mode(path, info, S_ISDIR(info.st_mode) ? kFolderLabel : "template file",
                       ErrorCode::kInvalidArgument);
}

bool is_pragma_once(const std::string& line) {
  std::size_t pos = line.find_first_not_of(" \t");
  return pos != std::string::npos && line.compare(pos, 12, "#pragma once") == 0;
}

}  // namespace

TemplateSources TemplateSources::embedded() {
  TemplateSources sources;
  for (const EmbeddedTemplate& file : embedded_templates()) {
    sources.files_.emplace(file.path, std::string(file.text));
  }
  sources.origin_ = "embedded";
  return sources;
}

TemplateSources TemplateSources::from_folder(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  if (!prepare_trusted_folder(folder, false, kFolderLabel, ErrorCode::kInvalidArgument)) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(kFolderLabel) + " '" + folder.string() + "' does not exist; expected a folder of templates");
  }
  TemplateSources sources;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    const bool template_file = entry.path().extension() == ".cuh";
    if (!template_file && !entry.is_directory()) continue;  // other files are never read
    check_trusted_entry(entry.path());
    if (!template_file || !entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    sources.files_.emplace(fs::relative(entry.path(), folder).generic_string(), text.str());
  }
  sources.origin_ = folder.string();
  return sources;
}

std::string TemplateSources::flatten(const std::string& path) const {
  std::string out;
  std::map<std::string, bool> seen;
  append(path, out, seen, 0);
  return out;
}

void TemplateSources::append(const std::string& path, std::string& out,
                             std::map<std::string, bool>& seen, int depth) const {
  if (depth > 32) {
    throw Error(ErrorCode::kInvalidArgument, "template includes nest deeper than 32 at '" + path + "'");
  }
  auto found = files_.find(path);
  if (found == files_.end()) {
    throw Error(ErrorCode::kNotFound,
                "template file '" + path + "' not found in the " + origin_ + " templates");
  }
  if (seen[path]) return;  // every template is include-once
  seen[path] = true;

  std::istringstream lines(found->second);
  std::string line;
  int number = 0;
  out += "#line 1 \"" + path + "\"\n";
  while (std::getline(lines, line)) {
    ++number;
    if (is_pragma_once(line)) {
      out += "\n";
      continue;
    }
    std::string include = quoted_include(line);
    if (include.empty()) {
      out += line;
      out += '\n';
      continue;
    }
    append(include, out, seen, depth + 1);
    out += "#line " + std::to_string(number + 1) + " \"" + path + "\"\n";
  }
}

}  // namespace shardjit
