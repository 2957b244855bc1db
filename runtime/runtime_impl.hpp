// Runtime::Impl: what the ops reach through the public Runtime. Internal.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/cache/tuning_store.hpp"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/env.hpp"
#include "shardjit/runtime.hpp"

namespace shardjit {

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& options);

  // The device's context, created on first use (this is where the driver is first opened).
  DeviceContext& device(int ordinal);

  // The kernel loaded on `ordinal`'s context, compiled for that device's arch: memory -> disk
  // -> NVRTC, then loaded once per device and kept for the Runtime's lifetime.
  std::shared_ptr<const LoadedKernel> load(const KernelSpec& spec, int ordinal,
                                           const std::string& prewarm_hint);

  // load() of every one of `specs`, asked for at once: the kernels missing from memory and disk
  // compile side by side on the cache's compile pool, after one info line naming `what` (the op),
  // how many kernels compile and `prewarm_hint`, the command that would have built them ahead.
  // Returns the loaded kernels in the order of `specs`.
  std::vector<std::shared_ptr<const LoadedKernel>> prepare(const std::vector<KernelSpec>& specs, int ordinal,
                                                           const std::string& what,
                                                           const std::string& prewarm_hint);

  // The tuning record of `key` in the cache folder (nullopt: none, or not trusted), and the
  // publication of one (runtime/cache/tuning_store.hpp).
  std::optional<TuningRecord> load_tuning(std::string_view key) const;
  void save_tuning(const TuningRecord& record) const;

  RuntimeConfig config;
  KernelCache cache;

 private:
  std::mutex devices_mutex_;
  std::map<int, std::unique_ptr<DeviceContext>> devices_;
  std::mutex loaded_mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<const LoadedKernel>> loaded_;
};

}  // namespace shardjit
