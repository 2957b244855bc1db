// The Hopper forward merging a row tile's partials in the kernel (linear_logp_fwd_hopper), where
// the host passes args.arrivals: each block, once its partials are stored, adds the partial
// sources it wrote to its row tile's counter, and the block that completes the count merges the
// tile's rows as the combine kernel would (combine_row, templates/linear_logp/combine.cuh: the
// same lanes a row, the same arithmetic in the same order; compiled into another kernel, it may
// round differently where the compiler contracts differently) and leaves the counter at zero for
// the next call (common/last_arrival.cuh). That takes the combine kernel's launch out of a call:
// 1.0-1.5 µs of a ~95 µs forward at 7 rows on an H100 (docs/perf-notes.md, "Calls of fewer rows
// than a tile").
// The host asks for it where a row tile's merge is one pass of the block's threads
// (fwd_merges_in_kernel): each further pass would add its latency to the row tile's last block.
// The sources the merge reads that the kernel does not write (a kept chunk's) were written by an
// earlier launch on the stream.
#pragma once

#include "common/last_arrival.cuh"
#include "linear_logp/combine.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block.cuh"

namespace shardjit {
namespace kernels {

// Named barrier of the forward's compute threads for the hand-over (the kernel uses no other).
constexpr unsigned int kFwdMergeBarrier = 1;

// Called by the `threads` compute threads (tid from 0, their threadIdx.x) after
// store_block_partials.
template <class TargetT, bool ENTROPY>
__device__ __forceinline__ void merge_row_tile_if_last(const LinearLogpFwdArgs& args, const FwdBlock& block, int tid,
                                                       int threads) {
  if (args.arrivals == nullptr) return;
  // A whole unit writes its own source and its split's other (empty) ones: a row tile's blocks
  // write splits x unit_pieces sources in all.
  const unsigned int written = block.work.piece < 0 ? static_cast<unsigned int>(args.unit_pieces) : 1u;
  const unsigned int total = static_cast<unsigned int>(args.splits * args.unit_pieces);
  if (!arrive_last(args.arrivals + block.work.row_tile, written, total, tid, static_cast<unsigned int>(threads),
                   kFwdMergeBarrier)) {
    return;
  }
  const int lanes = combine_lanes_per_row(args.combine.sources);
  for (int r = tid / lanes; r < block.rows; r += threads / lanes) {
    combine_row<TargetT, ENTROPY, 0>(args.combine, block.row0 + r, lanes, true);
  }
}

}  // namespace kernels
}  // namespace shardjit
