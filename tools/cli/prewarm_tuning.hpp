// `shardjit prewarm --tune`: after the compiles, build each single-GPU LinearLogp op of the
// request on GPU 0 with autotuning on, so that its forward tile is timed once and recorded in the
// cache (runtime/ops/linear_logp/tuning.hpp); an op that already has a record reuses it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <vector>

#include "runtime/tooling.hpp"
#include "shardjit/runtime.hpp"

namespace shardjit::cli {

struct TuningSummary {
  std::size_t tuned = 0;    // ops whose record now names a tile
  std::size_t skipped = 0;  // ops whose forward kernel is another arch's than GPU 0's
  std::size_t failed = 0;
};

// Prints one line per op to `out` (its choice and the candidates' times) and each failure to
// stderr. `runtime` must have been built with autotune on.
TuningSummary tune_prewarmed(Runtime& runtime, const std::vector<PrewarmItem>& items, std::FILE* out);

}  // namespace shardjit::cli
