// Host side of templates/linear_logp/fwd.cuh: the fused GEMM + online log-sum-exp kernel that
// writes per-row partial statistics for each vocabulary split.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "linear_logp/fwd_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp_layout.hpp"

namespace shardjit {

struct FwdTile {
  int bm = 128;
  int bn = 128;
  int bk = 64;
  int stages = 3;
  // The Hopper main loop (wgmma, sm_90a only; 128 x 256 x 64 tiles of 16-bit inputs) instead of
  // the portable one (templates/linear_logp/logit_mainloop.cuh).
  bool wgmma = false;

  bool operator==(const FwdTile&) const = default;
};

// The Hopper main loop's tile where it applies: a 16-bit dtype on an sm_90a target, with
// hopper_path (RuntimeConfig, SHARDJIT_HOPPER_PATH) on; 128 x 256 x 64 with a ring of `stages`
// slots (what the kernel's shared memory leaves room for).
std::optional<FwdTile> hopper_logit_tile(DType dtype, const std::string& arch, bool hopper_path, int stages);

// The forward's tile for a dtype on an arch ("sm_80", "sm_90a", ...): the Hopper main loop's
// where it applies (hopper_logit_tile with four stages: the Hopper epilogue works in registers and
// leaves the whole shared memory to the ring), else the portable path's: for 16-bit inputs the fastest
// measured tile whose shared memory fits the arch's per-block limit (128 x 256 x 64, 3 stages,
// on Hopper; 128 x 256 x 32 on A100), for fp32 the deepest 128 x 128 x 32 pipeline that fits.
FwdTile default_fwd_tile(DType dtype, const std::string& arch, bool hopper_path);

// The portable path's tiles for 16-bit inputs, fastest first where they fit.
std::span<const FwdTile> portable_fwd_tiles();

// Shared memory a block may opt into on `arch` (bytes), from the architecture tables.
unsigned smem_limit_for_arch(const std::string& arch);

// A kernel that recomputes logit tiles of the shard (linear_logp_fwd, linear_logp_bwd_dz): the
// parameters they share (the input types, the shard, the tile and its main loop), plus `own`.
KernelSpec logit_kernel_spec(const std::string& name, const LinearLogpLayout& layout, const FwdTile& tile,
                             std::vector<std::pair<std::string, ParamValue>> own);

KernelSpec linear_logp_fwd_spec(const LinearLogpLayout& layout, const FwdTile& tile);

unsigned linear_logp_fwd_smem(DType dtype, const FwdTile& tile);

// The vocabulary split counts the forward chooses from. Split s of S walks the vocabulary tiles
// [s P, (s + 1) P), P = ceil(V / S) (templates/linear_logp/fwd.cuh), and the combine kernel takes
// the number of partials as an argument, so any count would work; counts between these fill the
// last wave better on paper but ran slower (docs/perf-notes.md, "Forward: split counts that fill
// the last wave").
inline constexpr std::array<int, 8> kVocabSplitChoices = {1, 2, 4, 8, 16, 32, 64, 128};
inline constexpr int kMaxVocabSplits = kVocabSplitChoices.back();

struct SplitPlan {
  int splits = 1;
  // Row tiles of a group of the forward's block order (LinearLogpFwdArgs::group_rows): those a
  // wave of one block per multiprocessor holds, ceil(SMs / splits).
  int group_rows = 1;
};

// What the split choice needs to know of the GPU.
struct GpuShape {
  int sm_count = 132;
  std::int64_t l2_bytes = 50ll << 20;
};

// The split count for n_rows rows of `row_bytes` bytes (H x element size) over `valid_local`
// vocabulary columns: among the counts of kVocabSplitChoices (up to max_splits) whose
// efficiency (fwd_split_efficiency) is within `tolerance` of the best, the fewest whose
// concurrently running row tiles of X fit in half the L2 (so X is read from DRAM about once, not
// once per tile). Tensor parallelism passes a wider tolerance (there every split also travels
// to the other ranks) and a cap that keeps tp x splits within what one combine merges.
SplitPlan choose_vocab_splits(std::int64_t n_rows, std::int64_t row_bytes, std::int64_t valid_local,
                              const FwdTile& tile, const GpuShape& gpu, double tolerance = 0.02,
                              int max_splits = kMaxVocabSplits);

// Useful tile work over the tile slots the waves occupy when row_tiles x splits blocks of at
// most ceil(vocab_tiles / splits) tiles run one per multiprocessor.
double fwd_split_efficiency(std::int64_t row_tiles, std::int64_t vocab_tiles, int splits, int sm_count);

// The most partial rows (splits x rows) any call of up to n_rows rows needs, given the split
// count a call of `rows` rows takes. The split count depends on the rows only through the
// number of BM-row tiles, so every tile count is visited (a few thousand at most).
std::int64_t max_partial_rows(std::int64_t n_rows, int bm, const std::function<int(std::int64_t)>& splits_for);

void launch_linear_logp_fwd(const LoadedKernel& kernel, const kernels::LinearLogpFwdArgs& args,
                            const FwdTile& tile, int splits, unsigned smem_bytes, CUstream stream);

}  // namespace shardjit
