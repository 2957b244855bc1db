// The Runtime owns everything that outlives one op: the configuration, the kernel cache
// (memory and disk), the NVRTC compiler and the modules loaded on each device. One Runtime is
// shared by every op and every thread of a process; the caller owns it and keeps it alive
// longer than the ops built from it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace shardjit {

// Each field left empty takes its value from the environment (see `shardjit info`), then from
// the built-in default.
struct RuntimeOptions {
  std::optional<std::string> cache_dir;          // SHARDJIT_CACHE_DIR
  std::optional<bool> jit;                       // SHARDJIT_JIT: false = cache-only
  std::optional<std::string> template_dir;       // SHARDJIT_TEMPLATE_DIR
  std::optional<std::uint64_t> cache_max_bytes;  // SHARDJIT_CACHE_MAX_BYTES
  std::optional<std::string> dump_dir;           // SHARDJIT_DUMP_DIR
  std::optional<std::string> log_level;          // SHARDJIT_LOG_LEVEL
  std::optional<int> peer_blocks;                // SHARDJIT_PEER_BLOCKS: cap on a peer kernel's blocks
  std::optional<bool> peer_lines;                // SHARDJIT_PEER_LINES: false = small reduce-scatters in flagged words
  std::optional<bool> hopper_path;               // SHARDJIT_HOPPER_PATH: false = the portable main loop on sm_90a too
  std::optional<bool> autotune;                  // SHARDJIT_AUTOTUNE: true = ops time their tile candidates when built
  std::optional<int> compile_jobs;               // SHARDJIT_COMPILE_JOBS: kernels compiled at once, 0 = one per hardware thread
};

class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const std::string& cache_dir() const;
  bool jit_enabled() const;

  // The internals that the ops of the library reach through; not part of the stable API.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The library's version, "MAJOR.MINOR.PATCH".
const char* version() noexcept;

}  // namespace shardjit
