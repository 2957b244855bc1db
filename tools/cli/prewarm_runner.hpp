// Runs the CLI's prewarm: every item through build_prewarm_items (runtime/prewarm/build.hpp),
// with a progress line, and the failures and missing kernels reported at the end, sorted.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/tooling.hpp"
#include "tools/cli/progress.hpp"

namespace shardjit::cli {

struct PrewarmFailure {
  std::string kernel;  // "<spec text> <arch>"
  std::string origin;  // which model asked for it
  std::string error;
};

struct PrewarmSummary {
  std::size_t total = 0;
  std::size_t compiled = 0;
  std::size_t cached = 0;  // found in the disk cache (another run, or another process, made it)
  std::size_t prebuilt = 0;  // built with the library, copied into the cache folder
  std::vector<PrewarmFailure> failures;
  std::vector<PrewarmFailure> missing;  // built or found, then gone from the cache folder (PrewarmMissing)
  double seconds = 0;
};

PrewarmSummary run_prewarm(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                           Progress& progress);

}  // namespace shardjit::cli
