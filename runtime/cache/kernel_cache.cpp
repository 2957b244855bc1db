#include "runtime/cache/kernel_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "runtime/build_info.hpp"
#include "runtime/cache/cache_key.hpp"
#include "runtime/cache/entry_format.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::size_t kMemoryCacheEntries = 4096;

TemplateSources load_sources(const RuntimeConfig& config) {
  return config.template_dir ? TemplateSources::from_folder(*config.template_dir)
                             : TemplateSources::embedded();
}

// Cache-only mode may use a folder it cannot write (a root-owned cache baked into an image).
bool can_write(const std::string& dir) { return ::access(dir.c_str(), W_OK) == 0; }

// `text` as one word of a POSIX shell command: as it is where that is safe, else in single quotes.
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                             "0123456789_./:=+-@%,") == std::string::npos;
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

CacheEntry prebuilt_entry(const PrebuiltKernel& kernel) {
  return CacheEntry{kernel.key, kernel.spec_text, kernel.arch, kernel.lowered_name,
                    std::string(reinterpret_cast<const char*>(kernel.cubin), kernel.cubin_size)};
}

}  // namespace

KernelCache::KernelCache(const RuntimeConfig& config)
    : jit_(config.jit),
      template_dir_(config.template_dir),
      sources_(load_sources(config)),
      compiler_(config.dump_dir),
      memory_(kMemoryCacheEntries),
      pool_(config.compile_jobs > 0 ? static_cast<std::size_t>(config.compile_jobs) : default_compile_jobs()) {
  // A missing folder is created when kernels may be compiled into it. An existing one this user
  // cannot write (a root-owned cache baked into an image) is only read, with JIT on as with it
  // off; with JIT on, what it lacks is compiled into memory.
  std::error_code error;
  const bool exists = std::filesystem::exists(config.cache_dir, error);
  const bool writable = exists ? can_write(config.cache_dir) : config.jit;
  if (config.jit && exists && !writable) {
    log().warn("the kernel cache '{}' is not writable by this user: kernels missing from it are compiled into "
               "memory only, in every process",
               config.cache_dir);
  }
  disk_ = std::make_unique<DiskCache>(config.cache_dir, config.cache_max_bytes, writable);
}

const std::string& KernelCache::flattened(const std::string& file) const {
  std::lock_guard<std::mutex> lock(flattened_mutex_);
  auto found = flattened_.find(file);
  if (found == flattened_.end()) found = flattened_.emplace(file, sources_.flatten(file)).first;
  return found->second;
}

std::string KernelCache::key(const KernelSpec& spec, const std::string& arch) {
  // Within one process the sources and NVRTC are fixed, so spec text and arch name the key;
  // hashing the flattened source (hundreds of KB) is paid once.
  const std::string memory_key = spec.canonical_text() + "@" + arch;
  {
    std::lock_guard<std::mutex> lock(keys_mutex_);
    auto found = keys_.find(memory_key);
    if (found != keys_.end()) return found->second;
  }
  CacheKeyInputs inputs;
  inputs.schema_version = kCacheSchemaVersion;
  inputs.library_version = SHARDJIT_VERSION_STRING;
  inputs.source = flattened(spec.def().file);
  inputs.spec_text = spec.canonical_text();
  inputs.nvrtc_version = NvrtcCompiler::identity();
  inputs.arch = arch;
  inputs.options = NvrtcCompiler::compile_options(arch);
  std::string content_key = cache_key(inputs);
  std::lock_guard<std::mutex> lock(keys_mutex_);
  return keys_.emplace(memory_key, std::move(content_key)).first->second;
}

std::string KernelCache::prewarm_command(const std::string& prewarm_hint) const {
  return (template_dir_ ? "SHARDJIT_TEMPLATE_DIR=" + shell_word(*template_dir_) + " " : "") + prewarm_hint +
         " --cache-dir " + shell_word(disk_->dir().string());
}

std::size_t KernelCache::count_missing(const std::vector<KernelSpec>& specs, const std::string& arch) {
  std::size_t missing = 0;
  for (const KernelSpec& spec : specs) {
    if (memory_.contains(spec.canonical_text() + "@" + arch)) continue;
    const std::string content_key = key(spec, arch);
    if (prebuilt_.find(content_key) != nullptr) continue;
    std::error_code error;
    if (!std::filesystem::exists(disk_->entry_path(content_key), error)) ++missing;
  }
  return missing;
}

std::vector<CachedKernel> KernelCache::get_all(const std::vector<KernelSpec>& specs, const std::string& arch,
                                               const std::string& prewarm_hint) {
  std::vector<CachedKernel> kernels(specs.size());
  // Kernels already in memory cost no more than a thread hop would: those are looked up here.
  auto in_memory = [&](const KernelSpec& spec) { return memory_.contains(spec.canonical_text() + "@" + arch); };
  const auto to_build = static_cast<std::size_t>(std::count_if(specs.begin(), specs.end(), std::not_fn(in_memory)));
  if (to_build <= 1 || pool_.max_threads() == 1) {
    for (std::size_t i = 0; i < specs.size(); ++i) kernels[i] = get(specs[i], arch, prewarm_hint);
    return kernels;
  }
  std::vector<std::future<void>> done;
  done.reserve(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    done.push_back(pool_.submit([&, i] { kernels[i] = get(specs[i], arch, prewarm_hint); }));
  }
  // Every task is waited for before any error leaves: they write into `kernels`.
  for (std::future<void>& task : done) task.wait();
  for (std::future<void>& task : done) task.get();
  return kernels;
}

bool KernelCache::store_prebuilt(const KernelSpec& spec, const std::string& arch) {
  const std::string content_key = key(spec, arch);
  const PrebuiltKernel* built = prebuilt_.find(content_key);
  if (built == nullptr) return false;
  disk_->get_or_create(content_key, [&] { return prebuilt_entry(*built); });
  return true;
}

CachedKernel KernelCache::get(const KernelSpec& spec, const std::string& arch,
                              const std::string& prewarm_hint) {
  KernelOrigin origin = KernelOrigin::kMemory;
  bool computed = false;
  // Within one process the sources and NVRTC are fixed, so spec text and arch identify the
  // content key; a memory hit costs no hashing.
  auto kernel = memory_.get_or_compute(
      spec.canonical_text() + "@" + arch,
      [&] { return load_or_compile(spec, arch, prewarm_hint, &origin); }, &computed);
  return CachedKernel{kernel, computed ? origin : KernelOrigin::kMemory};
}

std::shared_ptr<const CompiledKernel> KernelCache::load_or_compile(const KernelSpec& spec,
                                                                   const std::string& arch,
                                                                   const std::string& prewarm_hint,
                                                                   KernelOrigin* origin) {
  NvrtcCompiler::check_arch(arch);
  const std::string content_key = key(spec, arch);
  auto to_compiled = [&](const CacheEntry& entry) {
    auto kernel = std::make_shared<CompiledKernel>();
    kernel->spec_text = entry.spec_text;
    kernel->arch = entry.arch;
    kernel->lowered_name = entry.lowered_name;
    kernel->cubin = entry.cubin;
    return kernel;
  };
  // Built with the library: no file to read, nothing to compile, in either mode.
  if (const PrebuiltKernel* built = prebuilt_.find(content_key)) {
    *origin = KernelOrigin::kPrebuilt;
    auto kernel = std::make_shared<CompiledKernel>();
    kernel->spec_text = built->spec_text;
    kernel->arch = built->arch;
    kernel->lowered_name = built->lowered_name;
    kernel->cubin.assign(reinterpret_cast<const char*>(built->cubin), built->cubin_size);
    return kernel;
  }

  if (!jit_) {
    std::optional<CacheEntry> entry = disk_->load(content_key);
    if (!entry) {
      // The command as this runtime would need it run: into its folder, from its templates (both
      // feed the key), whatever the shell that runs it exports.
      const std::string command = prewarm_command(prewarm_hint);
      throw Error(ErrorCode::kNotFound,
                  "kernel " + spec.canonical_text() + " for " + arch + " is not in the cache at " +
                      disk_->dir().string() +
                      " and JIT compilation is off (SHARDJIT_JIT=0, or the runtime's jit option); build it with: " +
                      command);
    }
    *origin = KernelOrigin::kDisk;
    return to_compiled(*entry);
  }

  auto compile = [&] {
    KernelSource source{spec.canonical_text(), spec.name_expression(), flattened(spec.def().file)};
    CompiledKernel compiled = compiler_.compile(source, arch);
    log().info("compiled {} for {} ({} bytes)", compiled.spec_text, arch, compiled.cubin.size());
    return CacheEntry{content_key, compiled.spec_text, arch, compiled.lowered_name, compiled.cubin};
  };
  if (!disk_->writable()) {
    std::optional<CacheEntry> entry = disk_->load(content_key);
    *origin = entry ? KernelOrigin::kDisk : KernelOrigin::kCompiled;
    return to_compiled(entry ? *entry : compile());
  }
  bool created = false;
  CacheEntry entry = disk_->get_or_create(content_key, compile, &created);
  *origin = created ? KernelOrigin::kCompiled : KernelOrigin::kDisk;
  return to_compiled(entry);
}

}  // namespace shardjit
