#include "tools/cli/prewarm_runner.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/ops/prewarm_build.hpp"

namespace shardjit::cli {

PrewarmSummary run_prewarm(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                           Progress& progress) {
  static constexpr const char* kVerbs[] = {"compiled", "cached", "failed"};
  const auto start = std::chrono::steady_clock::now();
  PrewarmSummary summary;
  summary.total = items.size();
  const auto finished = [&](const PrewarmItem& item, PrewarmOutcome outcome, const std::string& error) {
    const std::string kernel = item.name();
    if (outcome == PrewarmOutcome::kCompiled) ++summary.compiled;
    if (outcome == PrewarmOutcome::kCached) ++summary.cached;
    if (outcome == PrewarmOutcome::kFailed) summary.failures.push_back({kernel, item.origin, error});
    progress.finished(kVerbs[static_cast<int>(outcome)], kernel);
  };
  build_prewarm_items(cache, items, jobs, finished);
  progress.close();
  std::sort(summary.failures.begin(), summary.failures.end(),
            [](const PrewarmFailure& a, const PrewarmFailure& b) { return a.kernel < b.kernel; });
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace shardjit::cli
