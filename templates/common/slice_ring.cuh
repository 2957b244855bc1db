// The consumer side of the cp.async ring that feeds every GEMM-shaped kernel's main loop (the
// logit kernels and the backward's GEMM): how far ahead the ring loads, and the wait and barrier
// before each K slice is read. A main loop states two things for it:
//   kSlicesInFlight: how many slices' products may still be running when compute returns (the
//                    Hopper loop leaves one across each barrier); a loop with any has finish(),
//                    called before the accumulators are read;
//   kAsyncProxyReads: whether its tensor cores read shared memory through the async proxy
//                    (wgmma), so the slice's cp.async copies must be fenced into it.
#pragma once

#include "common/ptx.cuh"
#include "common/ptx_wgmma.cuh"

namespace shardjit {
namespace kernels {

// Slices the cp.async ring of STAGES slots loads ahead of the one being read: one slot is being
// read, kSlicesInFlight more may still be read by the tensor cores, the rest are in flight.
// The kernels issue this many loads before their K loop and one per slice after.
template <class Mainloop, int STAGES>
__device__ constexpr int ring_prefetch_slices() {
  constexpr int prefetch = STAGES - 1 - Mainloop::kSlicesInFlight;
  static_assert(prefetch >= 1, "the ring needs a stage beyond those being read");
  return prefetch;
}

// Waits until this thread's copies of the slice to be read next have landed (all but the
// prefetch's most recent cp.async groups), then makes every thread's copies visible to the
// whole block: to the generic proxy (ldmatrix, plain loads) through the barrier, and for a
// main loop that reads through the async proxy (wgmma) through the proxy fence before it. The
// same barrier frees the slot of the slice kSlicesInFlight + 1 steps back (every warp has
// waited for it before arriving), which is the slot the refill issued during compute fills.
template <class Mainloop, int STAGES>
__device__ __forceinline__ void wait_for_slice() {
  cp_async_wait_group<ring_prefetch_slices<Mainloop, STAGES>() - 1>();
  if constexpr (Mainloop::kAsyncProxyReads) fence_proxy_async_shared();
  __syncthreads();
}

}  // namespace kernels
}  // namespace shardjit
