// Helpers shared by the cache tests: deterministic entries, modes set for a scope, and a
// capture of the library's log. (Temporary folders: support/temp_dir.hpp.)
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include <spdlog/sinks/ostream_sink.h>

#include "runtime/cache/cache_key.hpp"
#include "runtime/cache/entry_format.hpp"
#include "runtime/logging.hpp"

namespace shardjit::test {

// Sets a mode on a path for the rest of a scope, then gives the owner full access back, so that
// the test's temporary folder can be removed even by a user other than root.
class ScopedMode {
 public:
  ScopedMode(std::filesystem::path path, mode_t mode) : path_(std::move(path)) {
    ok_ = ::chmod(path_.c_str(), mode) == 0;
  }
  ~ScopedMode() { ::chmod(path_.c_str(), 0700); }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;
  bool ok() const { return ok_; }

 private:
  std::filesystem::path path_;
  bool ok_ = false;
};

// A deterministic key and entry for a short name; the cubin is binary (holds NUL bytes) and
// cubin_bytes long, so that entries of one size can be made on purpose.
inline std::string test_key(const std::string& name) {
  CacheKeyInputs inputs;
  inputs.schema_version = kCacheSchemaVersion;
  inputs.library_version = "test";
  inputs.spec_text = name;
  return cache_key(inputs);
}

inline CacheEntry test_entry(const std::string& name, std::size_t cubin_bytes = 1000) {
  CacheEntry entry;
  entry.key = test_key(name);
  entry.spec_text = "linear_logp_fwd<" + name + ">";
  entry.arch = "sm_90a";
  entry.lowered_name = "_Z6kernelIL" + name + "EEvv";
  entry.cubin.resize(cubin_bytes);
  for (std::size_t i = 0; i < cubin_bytes; ++i) {
    entry.cubin[i] =
        static_cast<char>((i * 131 + name.size() * 7 + static_cast<unsigned char>(name[0])) & 0xff);
  }
  return entry;
}

inline mode_t mode_of(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return 0;
  return info.st_mode & 07777;
}

// Collects what the "shardjit" logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)) {
    log().sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = log().sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it) {
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
    }
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace shardjit::test
