// The main loops of the kernels that compute logit tiles, X [rows][k] times W [vocab][k] with both
// operands K contiguous (the forward, templates/linear_logp/fwd.cuh, and the dZ kernel,
// templates/linear_logp/bwd_dz.cuh), chosen by the kernels' template parameters:
//   16-bit T, WGMMA = false: the portable tensor-core loop (mma.sync, sm_80 and later);
//   16-bit T, WGMMA = true:  the Hopper loop (wgmma from shared memory, sm_90a only), with one
//                            slice left in flight when the ring has four stages or more;
//   fp32 T:                  exact fp32 FMA.
// All three share one contract: clear(), compute(a_stage, b_stage, warp, lane, between) per BK
// slice of the cp.async ring, store_columns<COLS>() to the shared-memory logit tile, and the
// ring contract of templates/common/slice_ring.cuh (kAsyncProxyReads, kSlicesInFlight, finish()).
#pragma once

#include "common/mma_mainloop.cuh"
#include "common/slice_ring.cuh"
#include "common/wgmma_mainloop.cuh"
#include "linear_logp/fwd_mainloop_simt.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, int STAGES, bool WGMMA>
struct LogitMainloop {
  using type = MmaTileMainloop<T, BM, BN, BK, MmaOperand::kKContiguous, MmaOperand::kKContiguous>;
};

template <class T, int BM, int BN, int BK, int STAGES>
struct LogitMainloop<T, BM, BN, BK, STAGES, true> {
  using type = WgmmaTileMainloop<T, BM, BN, BK, wgmma_slices_in_flight(STAGES)>;
};

template <int BM, int BN, int BK, int STAGES>
struct LogitMainloop<float, BM, BN, BK, STAGES, false> {
  using type = SimtMainloop<BM, BN, BK>;
};

}  // namespace kernels
}  // namespace shardjit
