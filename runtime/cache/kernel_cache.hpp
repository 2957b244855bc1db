// The kernel cache as the layers above see it: memory (single flight) -> the kernels built with
// the library (runtime/cache/prebuilt_kernels.hpp) -> disk (content addressed, locked per key
// across processes) -> NVRTC. Nothing above this knows NVRTC exists.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cache/disk_cache.hpp"
#include "runtime/cache/memory_cache.hpp"
#include "runtime/cache/prebuilt_kernels.hpp"
#include "runtime/compile/compile_pool.hpp"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/compile/template_sources.hpp"
#include "runtime/env.hpp"

namespace shardjit {

// kPrebuilt: from the library's own table, neither read from disk nor compiled.
enum class KernelOrigin { kMemory, kDisk, kCompiled, kPrebuilt };

struct CachedKernel {
  std::shared_ptr<const CompiledKernel> kernel;
  KernelOrigin origin = KernelOrigin::kMemory;
};

class KernelCache {
 public:
  // config.compile_jobs sizes the compile pool (0: one thread per hardware thread).
  explicit KernelCache(const RuntimeConfig& config);

  // The compiled kernel for `spec` on `arch`. In cache-only mode a kernel missing from memory
  // and disk is Error(kNotFound) whose message ends with the command that would build it:
  // `prewarm_hint` (the op's `shardjit prewarm ...`) into this cache's folder (--cache-dir), from
  // this runtime's template folder where it has one.
  CachedKernel get(const KernelSpec& spec, const std::string& arch, const std::string& prewarm_hint);

  // get() of every spec, on the runtime's compile pool: the missing kernels compile side by
  // side. Returns when all have finished, in the order of `specs`; where some failed, throws the
  // first failure's error (in that order) after the others have finished.
  std::vector<CachedKernel> get_all(const std::vector<KernelSpec>& specs, const std::string& arch,
                                    const std::string& prewarm_hint);

  // How many of `specs` on `arch` are neither in memory, prebuilt nor on disk: the ones get_all
  // would compile. Costs a key (hash) per spec not in memory, which later look-ups reuse.
  std::size_t count_missing(const std::vector<KernelSpec>& specs, const std::string& arch);

  // `prewarm_hint` (an op's `shardjit prewarm ...`) as this runtime needs it run: into its cache
  // folder (--cache-dir), from its template folder where it has one.
  std::string prewarm_command(const std::string& prewarm_hint) const;

  // The SHA-256 content key of `spec` on `arch` (docs/cache-format.md, "Key"), computed once per
  // spec, arch and process.
  std::string key(const KernelSpec& spec, const std::string& arch);

  // Writes the library's prebuilt kernel of `spec` on `arch` into the disk cache, unless it is
  // there already: a prewarmed folder then serves processes of any build (one built without the
  // table, or another compiler's). Returns false where no prebuilt kernel has that key. Throws
  // what the disk cache throws (a read-only folder: Error(kCacheError)).
  bool store_prebuilt(const KernelSpec& spec, const std::string& arch);

  const PrebuiltKernels& prebuilt() const { return prebuilt_; }
  DiskCache& disk() { return *disk_; }
  const TemplateSources& sources() const { return sources_; }
  bool jit_enabled() const { return jit_; }
  CompilePool& pool() { return pool_; }

  // The template `file` flattened (TemplateSources::flatten), as its kernels' keys hash it; made
  // once per file and process.
  const std::string& flattened(const std::string& file) const;

 private:
  std::shared_ptr<const CompiledKernel> load_or_compile(const KernelSpec& spec, const std::string& arch,
                                                        const std::string& prewarm_hint,
                                                        KernelOrigin* origin);

  bool jit_;
  std::optional<std::string> template_dir_;  // SHARDJIT_TEMPLATE_DIR: templates from a folder
  TemplateSources sources_;
  NvrtcCompiler compiler_;
  std::unique_ptr<DiskCache> disk_;
  PrebuiltKernels prebuilt_;
  MemoryCache memory_;
  mutable std::mutex flattened_mutex_;
  mutable std::map<std::string, std::string> flattened_;  // template file -> flattened source
  std::mutex keys_mutex_;
  std::unordered_map<std::string, std::string> keys_;  // spec text "@" arch -> content key
  CompilePool pool_;  // last: destroyed first, so no task outlives what it uses
};

}  // namespace shardjit
