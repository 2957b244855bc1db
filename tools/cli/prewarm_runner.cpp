#include "tools/cli/prewarm_runner.hpp"

#include <algorithm>
#include <chrono>


namespace shardjit::cli {

PrewarmSummary run_prewarm(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                           Progress& progress) {
  static constexpr const char* kVerbs[] = {"compiled", "cached", "failed", "prebuilt"};
  const auto start = std::chrono::steady_clock::now();
  PrewarmSummary summary;
  summary.total = items.size();
  const auto finished = [&](const PrewarmItem& item, PrewarmOutcome outcome, const std::string& error) {
    const std::string kernel = item.name();
    if (outcome == PrewarmOutcome::kCompiled) ++summary.compiled;
    if (outcome == PrewarmOutcome::kCached) ++summary.cached;
    if (outcome == PrewarmOutcome::kPrebuilt) ++summary.prebuilt;
    if (outcome == PrewarmOutcome::kFailed) summary.failures.push_back({kernel, item.origin, error});
    progress.finished(kVerbs[static_cast<int>(outcome)], kernel);
  };
  const auto missing = [&](const PrewarmItem& item, const std::string& error) {
    summary.missing.push_back({item.name(), item.origin, error});
  };
  build_prewarm_items(cache, items, jobs, finished, missing);
  progress.close();
  const auto by_kernel = [](const PrewarmFailure& a, const PrewarmFailure& b) { return a.kernel < b.kernel; };
  std::sort(summary.failures.begin(), summary.failures.end(), by_kernel);
  std::sort(summary.missing.begin(), summary.missing.end(), by_kernel);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace shardjit::cli
