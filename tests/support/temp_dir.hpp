// A private temporary folder for one test, removed with everything in it at the end.
#pragma once

#include <filesystem>

namespace shardjit::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace shardjit::testing
