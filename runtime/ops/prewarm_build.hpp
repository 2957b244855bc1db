// Builds a prewarm's kernels (runtime/ops/prewarm_plan.hpp) through the kernel cache (memory ->
// disk -> NVRTC) on a pool of threads, for shardjit::prewarm and the `shardjit prewarm` CLI. A
// kernel that fails does not stop the others; it is reported, not thrown.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/ops/prewarm_plan.hpp"

namespace shardjit {

enum class PrewarmOutcome { kCompiled, kCached, kFailed };

// What happened to one item; `error` is the message of a failed one, else empty. Called once an
// item from the worker threads, one call at a time.
using PrewarmFinished = std::function<void(const PrewarmItem& item, PrewarmOutcome outcome, const std::string& error)>;

// Builds every item on up to `jobs` threads (fewer when the system runs out of them).
void build_prewarm_items(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                         const PrewarmFinished& finished);

}  // namespace shardjit
