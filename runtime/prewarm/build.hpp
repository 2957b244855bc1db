// Builds a prewarm's kernels (runtime/prewarm/plan.hpp) through the kernel cache (memory ->
// disk -> NVRTC) on a pool of threads, for shardjit::prewarm and the `shardjit prewarm` CLI. A
// kernel that fails does not stop the others; it is reported, not thrown. A prewarm only counts
// where its kernels stay in the cache folder, so the build ends by looking for each of them there.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/prewarm/plan.hpp"

namespace shardjit {

// kPrebuilt: built with the library, and copied into the cache folder (for processes of other
// builds, and cache-only ones).
enum class PrewarmOutcome { kCompiled, kCached, kFailed, kPrebuilt };

// What happened to one item; `error` is the message of a failed one, else empty. Called once an
// item from the worker threads, one call at a time.
using PrewarmFinished = std::function<void(const PrewarmItem& item, PrewarmOutcome outcome, const std::string& error)>;

// Called, after every item has finished, for each item that was built or found but whose entry is
// not in the cache folder any more or does not verify there, with the reason as far as the cache
// knows it (DiskCache::entry_problem): it could not be stored (the error), the size cap or a full
// disk evicted it for later items, the folder is read-only, or another process removed it. A
// cache-only process would not find it.
using PrewarmMissing = std::function<void(const PrewarmItem& item, const std::string& error)>;

// Builds every item on up to `jobs` threads (fewer when the system runs out of them), then looks
// for each built item's entry in the cache folder and checks that it verifies.
void build_prewarm_items(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                         const PrewarmFinished& finished, const PrewarmMissing& missing);

}  // namespace shardjit
