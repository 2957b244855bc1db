// What the host benchmarks share: a private temporary cache folder, and the kernel specs of a
// tiny model taken from the same plan `shardjit prewarm` uses.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/env.hpp"
#include "runtime/prewarm/plan.hpp"

namespace shardjit::bench {

// A folder of its own under the system's temporary folder, removed with its contents at the end.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "shardjit-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A writable cache configuration in `folder`, with JIT on and no size cap.
inline RuntimeConfig bench_config(const std::filesystem::path& folder) {
  RuntimeConfig config;
  config.cache_dir = (folder / "cache").string();
  config.jit = true;
  config.cache_max_bytes = UINT64_MAX;
  config.log_level = "warn";
  return config;
}

// The first kernel of `template_name` that a tiny model (hidden 64, vocab 300, bf16, TP 1)
// loads on `arch`.
inline KernelSpec tiny_spec(const std::string& template_name, const std::string& arch) {
  PrewarmRequest request;
  request.models = {ModelShape{"tiny", 64, 300, 0}};
  request.archs = {arch};
  for (const PrewarmItem& item : prewarm_items(request)) {
    if (item.spec.template_name() == template_name) return item.spec;
  }
  throw std::runtime_error("a tiny model loads no " + template_name + " kernel");
}

}  // namespace shardjit::bench
