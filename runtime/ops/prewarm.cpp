// shardjit::prewarm (include/shardjit/prewarm.hpp): the kernels of prewarm_items, built on a few
// threads through the Runtime's cache.
#include "shardjit/prewarm.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "runtime/ops/prewarm_plan.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void bad_config(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "prewarm: " + what); }

// Builds every item on `jobs` threads; a kernel that fails is recorded, not thrown.
PrewarmResult build_items(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs) {
  PrewarmResult result;
  result.total = items.size();
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < items.size(); i = next.fetch_add(1)) {
      const PrewarmItem& item = items[i];
      std::string error;
      bool compiled = false;
      try {
        compiled = cache.get(item.spec, item.arch, "shardjit::prewarm").origin == KernelOrigin::kCompiled;
      } catch (const std::exception& caught) {
        error = caught.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (!error.empty()) {
        result.failures.push_back(item.spec.canonical_text() + " " + item.arch + ": " + error);
      } else if (compiled) {
        ++result.compiled;
      } else {
        ++result.cached;
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(jobs), items.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
  return result;
}

}  // namespace

PrewarmResult prewarm(Runtime& runtime, const PrewarmConfig& config) {
  if (config.archs.empty()) bad_config("archs: expected at least one target arch, e.g. \"sm_90a\"");
  if (config.jobs < 1) bad_config("jobs: expected 1 or more, got " + std::to_string(config.jobs));
  Runtime::Impl& impl = runtime.impl();
  if (!impl.config.jit) {
    bad_config("the Runtime has JIT off (cache-only, SHARDJIT_JIT=0); expected one that may compile into its cache");
  }
  PrewarmRequest request;
  request.models = {ModelShape{"prewarm", config.hidden, config.vocab, config.valid_vocab}};
  request.tp = config.tp;
  request.dtypes = config.dtypes;
  request.archs = config.archs;
  request.target_dtypes = config.target_dtypes;
  request.bias_dtypes = config.bias_dtypes;
  request.entropy = config.entropy;
  request.backward = config.backward;
  request.dz_fp32 = config.dz_fp32;
  request.grad_filter = config.grad_filter;
  request.collectives = config.collectives;
  request.hopper_path = impl.config.hopper_path;
  return build_items(impl.cache, prewarm_items(request), config.jobs);
}

}  // namespace shardjit
