// A group of blocks hands its work to whichever block finishes last, with no block waiting for
// another: each block, once its stores are done, adds what it contributed to the group's counter
// in global memory, and the block whose addition completes the total goes on to read everything
// the others stored. That block sets the counter back to zero, so the next launch finds it ready:
// every contribution has arrived by then. Used by the pieces of a tile split along K
// (common/stream_k_fixup.cuh) and by the forward's blocks of a row tile (linear_logp/fwd_merge.cuh).
#pragma once

#include "common/ptx_memory.cuh"

namespace shardjit {
namespace kernels {

// Called by the `threads` threads that share named barrier `barrier` (the block's compute
// threads, ctid from 0) after their stores: adds `count` to `*counter` and returns, to all of
// them, whether that completed `total`. The returning last block has seen every other block's
// stores (its loads should bypass L1: __ldcg).
__device__ __forceinline__ bool arrive_last(unsigned int* counter, unsigned int count, unsigned int total, int ctid,
                                            unsigned int threads, unsigned int barrier) {
  // The block's stores precede thread 0's fence (the barrier), which releases them with the
  // count: one fence a block, not __threadfence's sequentially consistent one in every thread
  // (with every forward merging in its kernel, that cost ~4 % at 16384 rows: 2648 blocks arrive).
  bar_sync(barrier, threads);
  bool last = false;
  if (ctid == 0) {
    fence_acq_rel_gpu();
    last = atomicAdd(counter, count) + count == total;
    if (last) {
      *counter = 0;
      fence_acq_rel_gpu();  // acquires the other blocks' stores, seen through the count
    }
  }
  // The barrier hands what thread 0 acquired to the block's other threads.
  last = !bar_red_and(barrier, threads, !last);
  return last;
}

}  // namespace kernels
}  // namespace shardjit
