#include "runtime/prewarm/build.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

namespace shardjit {
namespace {

// Builds one item; never throws, so that one bad kernel cannot take the pool down.
PrewarmOutcome build(KernelCache& cache, const PrewarmItem& item, std::string* error) {
  try {
    // JIT is on during a prewarm, so the cache-only hint is never shown.
    const CachedKernel kernel = cache.get(item.spec, item.arch, "shardjit prewarm");
    if (kernel.origin == KernelOrigin::kCompiled) return PrewarmOutcome::kCompiled;
    // A prebuilt kernel may have been taken from memory (an op of this process built earlier).
    if (cache.store_prebuilt(item.spec, item.arch)) return PrewarmOutcome::kPrebuilt;
    return PrewarmOutcome::kCached;
  } catch (const std::exception& caught) {
    *error = caught.what();
  } catch (...) {
    *error = "unexpected error of an unknown type";
  }
  return PrewarmOutcome::kFailed;
}

}  // namespace

void build_prewarm_items(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                         const PrewarmFinished& finished, const PrewarmMissing& missing) {
  std::vector<PrewarmOutcome> outcomes(items.size(), PrewarmOutcome::kFailed);
  std::atomic<std::size_t> next{0};
  std::mutex finished_mutex;  // one call of `finished` at a time
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < items.size(); i = next.fetch_add(1)) {
      std::string error;
      outcomes[i] = build(cache, items[i], &error);
      std::lock_guard<std::mutex> lock(finished_mutex);
      finished(items[i], outcomes[i], error);
    }
  };
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(std::max(jobs, 1)), items.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < threads; ++i) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      // Out of threads: the workers already started still take every item.
      if (pool.empty()) throw;
      break;
    }
  }
  for (std::thread& thread : pool) thread.join();

  // Only an entry that verifies counts: a folder, a damaged or an immutable file at its path is
  // not a kernel a cache-only process could load.
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (outcomes[i] == PrewarmOutcome::kFailed) continue;
    const std::optional<std::string> problem = cache.disk().entry_problem(cache.key(items[i].spec, items[i].arch));
    if (problem) missing(items[i], *problem);
  }
}

}  // namespace shardjit
