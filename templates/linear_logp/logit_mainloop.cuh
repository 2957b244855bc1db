// The main loops of the kernels that compute logit tiles, X [rows][k] times W [vocab][k] with both
// operands K contiguous (the forward, templates/linear_logp/fwd.cuh, and the dZ kernel,
// templates/linear_logp/bwd_dz.cuh), chosen by the kernels' template parameters:
//   16-bit T, WGMMA = false: the portable tensor-core loop (mma.sync, sm_80 and later);
//   16-bit T, WGMMA = true:  the Hopper loop (wgmma from shared memory, sm_90a only), with one
//                            slice left in flight when the ring has four stages or more;
//   fp32 T:                  exact fp32 FMA.
// All three share one contract: clear(), compute(a_stage, b_stage, warp, lane, between) per BK
// slice of the cp.async ring, store_columns<COLS>() to the shared-memory logit tile,
// kAsyncProxyReads (whether the slice's copies must be fenced into the async proxy before the
// slice's barrier, see wait_for_slice) and kSlicesInFlight (how many slices' products may still
// be running when compute returns; a loop with any has finish(), called before the
// accumulators are read).
#pragma once

#include "common/mma_mainloop.cuh"
#include "common/ptx.cuh"
#include "common/wgmma_mainloop.cuh"
#include "linear_logp/fwd_mainloop_simt.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, int STAGES, bool WGMMA>
struct LogitMainloop {
  using type = MmaTileMainloop<T, BM, BN, BK, MmaOperand::kKContiguous, MmaOperand::kKContiguous>;
};

// A slice in flight keeps the tensor cores busy across the slice barrier but takes a stage from
// the prefetch (ring_prefetch_slices); below four stages that would leave one slice of
// prefetch, too little to hide a load from L2, so those rings wait for every slice.
template <class T, int BM, int BN, int BK, int STAGES>
struct LogitMainloop<T, BM, BN, BK, STAGES, true> {
  using type = WgmmaTileMainloop<T, BM, BN, BK, (STAGES >= 4 ? 1 : 0)>;
};

template <int BM, int BN, int BK, int STAGES>
struct LogitMainloop<float, BM, BN, BK, STAGES, false> {
  using type = SimtMainloop<BM, BN, BK>;
};

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
