// Start and end barriers between the ranks' kernels. A block publishes a flag in every peer's
// signal area with a system-scope release store after a block barrier, so a peer whose acquire
// load sees the flag also sees every write the block made before it; it waits on its own signal
// area (local memory; the peers write into it), within the call's time bound. Epochs live in
// device memory, so calls need no host involvement and replay in CUDA graphs.
#pragma once

#include "collective/peer_sync_args.cuh"
#include "common/ptx_memory.cuh"

namespace shardjit {
namespace kernels {

// The epoch of this call for `slot`: one more than the last (read by every thread; the last
// epoch is only written after the block's end barrier).
__device__ __forceinline__ unsigned long long next_epoch(const PeerSync& sync, int slot) {
  return sync.signals[sync.rank]->epoch[slot] + 1;
}

// Thread 0, after a block barrier: flags[slot][rank] = epoch in every peer's area.
__device__ __forceinline__ void publish_to_peers(const PeerSync& sync, bool start, int slot,
                                                 unsigned long long epoch) {
  for (int q = 0; q < sync.world; ++q) {
    if (q == sync.rank) continue;
    PeerSignals* peer = sync.signals[q];
    st_release_sys_u64(start ? &peer->start[slot][sync.rank] : &peer->end[slot][sync.rank], epoch);
  }
}

// The `threads` threads from `thread` on, which synchronize on named barrier `barrier` (0 and
// the whole block: __syncthreads'): wait until every peer's flag in slots [first, first + count)
// of this rank's area has reached `epoch`, the threads sharing the flags. Ends with that
// barrier; returns false on every one of them when some wait ran out (counted once).
__device__ __forceinline__ bool wait_for_peers(const PeerSync& sync, bool start, int first, int count,
                                               unsigned long long epoch, int thread, int threads,
                                               unsigned int barrier) {
  PeerSignals* mine = sync.signals[sync.rank];
  bool ok = true;
  const int flags = count * sync.world;
  const unsigned long long began = globaltimer_ns();
  for (int f = thread; f < flags && ok; f += threads) {
    const int slot = first + f / sync.world;
    const int q = f % sync.world;
    if (q == sync.rank) continue;
    const unsigned long long* flag = start ? &mine->start[slot][q] : &mine->end[slot][q];
    while (ld_acquire_sys_u64(flag) < epoch) {
      if (globaltimer_ns() - began > sync.timeout_ns) {
        ok = false;
        break;
      }
    }
  }
  const bool all_ok = bar_red_and(barrier, threads, ok);
  if (!all_ok && thread == 0) atomicAdd(&sync.status->timeouts, 1u);
  return all_ok;
}

// The whole block waits.
__device__ __forceinline__ bool wait_for_peers(const PeerSync& sync, bool start, int first, int count,
                                               unsigned long long epoch) {
  return wait_for_peers(sync, start, first, count, epoch, threadIdx.x, blockDim.x, 0);
}

// True once any wait of this op ran out (the status word's count is sticky until the host's
// check() reads and clears it, and marks the op unusable). A call that starts failed poisons its
// outputs and neither publishes nor waits: the ranks' epochs no longer match, so a later call
// must not pass a barrier on stale flags and sum stale data.
// Every thread of the block calls it and gets the same answer (thread 0 reads the word: another
// block of this very call may be counting a timeout at the same moment).
__device__ __forceinline__ bool already_failed(const PeerSync& sync) {
  const bool failed = threadIdx.x == 0 && *static_cast<volatile unsigned int*>(&sync.status->timeouts) != 0u;
  return __syncthreads_or(failed) != 0;
}

// Thread 0, after the block's end barrier: remembers the epoch for the next call.
__device__ __forceinline__ void finish_epoch(const PeerSync& sync, int slot, unsigned long long epoch) {
  sync.signals[sync.rank]->epoch[slot] = epoch;
}

}  // namespace kernels
}  // namespace shardjit
