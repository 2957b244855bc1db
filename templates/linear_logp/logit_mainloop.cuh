// The main loops of the kernels that compute logit tiles, X [rows][k] times W [vocab][k] with both
// operands K contiguous (the forward, templates/linear_logp/fwd.cuh, and the dZ kernel,
// templates/linear_logp/bwd_dz.cuh), chosen by the kernels' template parameters:
//   16-bit T, WGMMA = false: the portable tensor-core loop (mma.sync, sm_80 and later);
//   16-bit T, WGMMA = true:  the Hopper loop (wgmma from shared memory, sm_90a only);
//   fp32 T:                  exact fp32 FMA.
// All three share one contract: clear(), compute(a_stage, b_stage, warp, lane, between) per BK
// slice of the cp.async ring, store_columns<COLS>() to the shared-memory logit tile, and
// kAsyncProxyReads (whether the slice's copies must be fenced into the async proxy before the
// slice's barrier, see wait_for_slice).
#pragma once

#include "common/mma_mainloop.cuh"
#include "common/ptx.cuh"
#include "common/wgmma_mainloop.cuh"
#include "linear_logp/fwd_mainloop_simt.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, bool WGMMA>
struct LogitMainloop {
  using type = MmaTileMainloop<T, BM, BN, BK, MmaOperand::kKContiguous, MmaOperand::kKContiguous>;
};

template <class T, int BM, int BN, int BK>
struct LogitMainloop<T, BM, BN, BK, true> {
  using type = WgmmaTileMainloop<T, BM, BN, BK>;
};

template <int BM, int BN, int BK>
struct LogitMainloop<float, BM, BN, BK, false> {
  using type = SimtMainloop<BM, BN, BK>;
};

// Waits until this thread's copies of the slice to be read next have landed (all but the
// PENDING most recent cp.async groups), then makes every thread's copies visible to the whole
// block: to the generic proxy (ldmatrix, plain loads) through the barrier, and for a main loop
// that reads through the async proxy (wgmma) through the proxy fence before it.
template <class Mainloop, int PENDING>
__device__ __forceinline__ void wait_for_slice() {
  cp_async_wait_group<PENDING>();
  if constexpr (Mainloop::kAsyncProxyReads) fence_proxy_async_shared();
  __syncthreads();
}

}  // namespace kernels
}  // namespace shardjit
