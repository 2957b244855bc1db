// What a block of linear_logp_fwd writes when its tiles are done, on either main loop: its rows'
// partials to the source of its unit or piece (fwd_block_order.cuh), and, for a whole unit, empty
// partials to its split's other sources, which only cut units' pieces fill.
#pragma once

#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block_order.cuh"
#include "linear_logp/partial_merge.cuh"

namespace shardjit {
namespace kernels {

// `epilogue.store(out, row0, n_rows, tid)` writes the block's rows; `threads` threads call this,
// tid from 0.
template <class Epilogue>
__device__ __forceinline__ void store_block_partials(const Epilogue& epilogue, const LinearLogpFwdArgs& args,
                                                     const FwdBlockWork& work, long long row0, int bm, int tid,
                                                     int threads) {
  const int first_source = work.split * args.unit_pieces;
  const int piece = work.piece < 0 ? 0 : work.piece;
  epilogue.store(args.partials + static_cast<long long>(first_source + piece) * args.n_rows, row0, args.n_rows, tid);
  if (work.piece < 0) {
    for (int c = 1; c < args.unit_pieces; ++c) {
      store_empty_partials(args.partials + static_cast<long long>(first_source + c) * args.n_rows, row0, args.n_rows,
                           bm, tid, threads);
    }
  }
}

}  // namespace kernels
}  // namespace shardjit
