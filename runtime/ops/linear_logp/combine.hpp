// Host side of templates/linear_logp/combine.cuh: the kernel that merges per-row partial
// statistics of S sources (vocabulary splits, TP ranks) into logp, lse and entropy.
#pragma once

#include <cuda.h>

#include "linear_logp/combine_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

// The most partial sources (vocabulary splits x TP ranks) one combine kernel merges.
inline constexpr int kMaxCombineSources = 1024;

// `peers`: 0 for partials in one local buffer; the TP degree for partials read from the ranks'
// symmetric buffers (args.rank_partials, args.sync). The number of partials is an argument
// (LogpCombineArgs::sources), so one kernel serves every split count.
KernelSpec logp_combine_spec(DType target_dtype, bool entropy, int peers = 0);

// Throws Error(kInternal) unless args.sources is in [1, kMaxCombineSources]; both launches below
// check it, and so does the forward that merges in its own kernel (templates/linear_logp/fwd_merge.cuh).
void check_combine_sources(const kernels::LogpCombineArgs& args);

// A group of combine_lanes_per_row(sources) lanes a row; nothing is launched for zero rows. Both
// launches check the sources (check_combine_sources; the peer variant's callers make it tp x splits).
void launch_logp_combine(const LoadedKernel& kernel, const kernels::LogpCombineArgs& args, CUstream stream);

// The peer variant: `blocks` blocks (the same on every rank; each meets its peers' in barriers),
// launched even for zero rows.
void launch_logp_combine_peers(const LoadedKernel& kernel, const kernels::LogpCombineArgs& args, int blocks,
                               CUstream stream);

// The blocks of the peer variant for n_rows rows of `sources` sources: one per block's worth of
// rows (kLogpCombineThreads / combine_lanes_per_row), at most max_blocks (all resident at once)
// and at least one.
int logp_combine_peer_blocks(std::int64_t n_rows, int sources, int max_blocks);

}  // namespace shardjit
