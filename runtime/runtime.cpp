#include "runtime/runtime_impl.hpp"

#include <algorithm>

#include "runtime/build_info.hpp"
#include "runtime/logging.hpp"

namespace shardjit {
namespace {

RuntimeConfig configure(const RuntimeOptions& options) {
  RuntimeConfig config = resolve_config(options);
  // One logger for the process: a Runtime made with defaults leaves the level another chose.
  if (config.log_level) set_log_level(*config.log_level);
  return config;
}

}  // namespace

Runtime::Impl::Impl(const RuntimeOptions& options) : config(configure(options)), cache(config) {}

DeviceContext& Runtime::Impl::device(int ordinal) {
  std::lock_guard<std::mutex> lock(devices_mutex_);
  auto found = devices_.find(ordinal);
  if (found == devices_.end()) {
    found = devices_.emplace(ordinal, std::make_unique<DeviceContext>(ordinal)).first;
  }
  return *found->second;
}

std::optional<TuningRecord> Runtime::Impl::load_tuning(std::string_view key) const {
  return load_tuning_record(config.cache_dir, key);
}

void Runtime::Impl::save_tuning(const TuningRecord& record) const { save_tuning_record(config.cache_dir, record); }

std::shared_ptr<const LoadedKernel> Runtime::Impl::load(const KernelSpec& spec, int ordinal,
                                                        const std::string& prewarm_hint) {
  DeviceContext& context = device(ordinal);
  const std::string arch = context.arch();
  auto slot = std::make_pair(spec.canonical_text() + "@" + arch, ordinal);
  {
    std::lock_guard<std::mutex> lock(loaded_mutex_);
    auto found = loaded_.find(slot);
    if (found != loaded_.end()) return found->second;
  }
  CachedKernel cached = cache.get(spec, arch, prewarm_hint);
  auto module = std::make_shared<const LoadedModule>(context, cached.kernel->cubin);
  auto kernel = std::make_shared<LoadedKernel>();
  kernel->function = module->function(cached.kernel->lowered_name);
  kernel->module = module;
  kernel->spec_text = cached.kernel->spec_text;
  std::lock_guard<std::mutex> lock(loaded_mutex_);
  // Two threads may have loaded the same kernel; keep the first, drop the other module.
  return loaded_.emplace(slot, std::move(kernel)).first->second;
}

std::vector<std::shared_ptr<const LoadedKernel>> Runtime::Impl::prepare(const std::vector<KernelSpec>& specs,
                                                                        int ordinal, const std::string& what,
                                                                        const std::string& prewarm_hint) {
  const std::string arch = device(ordinal).arch();
  if (config.jit) {
    const std::size_t missing = cache.count_missing(specs, arch);
    if (missing > 0) {
      log().info("{} compiles {} of its {} kernels for {} ({} at a time; seconds each); `{}` builds them ahead",
                 what, missing, specs.size(), arch, std::min(missing, cache.pool().max_threads()),
                 cache.prewarm_command(prewarm_hint));
    }
  }
  cache.get_all(specs, arch, prewarm_hint);
  std::vector<std::shared_ptr<const LoadedKernel>> kernels;
  kernels.reserve(specs.size());
  for (const KernelSpec& spec : specs) kernels.push_back(load(spec, ordinal, prewarm_hint));
  return kernels;
}

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Runtime::~Runtime() = default;

const std::string& Runtime::cache_dir() const { return impl_->config.cache_dir; }
bool Runtime::jit_enabled() const { return impl_->config.jit; }

const char* version() noexcept { return SHARDJIT_VERSION_STRING; }

}  // namespace shardjit
