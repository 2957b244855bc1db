// prewarm: compiles the kernels that the LinearLogp ops of a model will load (and, optionally,
// ReduceScatter's and MoeCombine's) into the Runtime's cache folder ahead of time, for each TP
// degree, dtype and target arch, so that servers can then start cache-only (SHARDJIT_JIT=0)
// without compiling. What `shardjit prewarm` and Python's shardjit.prewarm do, for a C++ program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardjit/dtype.hpp"
#include "shardjit/runtime.hpp"

namespace shardjit {

struct PrewarmConfig {
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;        // rows of the whole LM head (every rank's shard together)
  std::int64_t valid_vocab = 0;  // 0: all of vocab
  std::vector<int> tp = {1};     // TP degrees; each rank's shard of an even split
  std::vector<DType> dtypes = {DType::kBF16};
  std::vector<std::string> archs;  // targets such as "sm_80" or "sm_90a"; at least one
  std::vector<DType> target_dtypes = {DType::kInt64};
  std::vector<std::optional<DType>> bias_dtypes = {std::nullopt};
  std::vector<bool> entropy = {false};
  bool backward = false;     // also the kernels of LinearLogp::backward
  bool dz_fp32 = false;      // with backward: also those of ops built with dz_fp32
  bool grad_filter = false;  // with backward: also those of ops that filter gradient tiles
  bool collectives = false;  // also ReduceScatter's and MoeCombine's, for each TP degree up to 8 (more: error)
  int jobs = 0;              // kernels compiled at once; 0: one per hardware thread, as the CLI
};

struct PrewarmResult {
  std::size_t total = 0;     // kernels the config asks for
  std::size_t compiled = 0;  // compiled now
  std::size_t cached = 0;    // already in the cache
  std::size_t prebuilt = 0;  // built with the library (shape-independent kernels), copied into the cache
  std::vector<std::string> failures;  // "<kernel spec> <arch>: <message>", one a kernel that failed
  // Compiled or found, but no longer in the cache folder at the end ("<kernel spec> <arch>:
  // <reason>"): the cache's size cap evicted them to make room for later kernels. A cache-only
  // server would not find them; raise the cap (RuntimeOptions::cache_max_bytes) and prewarm again.
  std::vector<std::string> missing;
};

// Compiles into runtime's cache what the config asks for and is not there yet. The kernels are
// those of ops built with the runtime's settings (its Hopper switch, SHARDJIT_HOPPER_PATH).
// Error(kInvalidArgument) for a config check_prewarm_config refuses, an impossible TP degree or
// shape, or a runtime with JIT off; a kernel that fails to compile is reported in failures, not
// thrown.
PrewarmResult prewarm(Runtime& runtime, const PrewarmConfig& config);

// What prewarm refuses before it plans anything, without a Runtime: Error(kInvalidArgument) for
// an empty list (archs, tp, dtypes, target_dtypes, bias_dtypes, entropy), jobs below 0, dz_fp32
// or grad_filter without backward (variants of the backward's kernels), or an arch this NVRTC
// cannot build for.
void check_prewarm_config(const PrewarmConfig& config);

}  // namespace shardjit
