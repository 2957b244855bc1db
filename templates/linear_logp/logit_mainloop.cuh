// The portable main loops of the kernels that compute logit tiles, X [rows][k] times W [vocab][k]
// with both operands K contiguous (the forward, templates/linear_logp/fwd.cuh, and the dZ kernel,
// templates/linear_logp/bwd_dz.cuh), chosen by the input type:
//   16-bit T: the tensor-core loop (mma.sync, sm_80 and later);
//   fp32 T:   exact fp32 FMA.
// Both share one contract: clear(), compute(a_stage, b_stage, warp, lane, between) per BK slice of
// the cp.async ring, store_columns<COLS>() to the shared-memory logit tile, and the ring contract
// of templates/common/slice_ring.cuh (kAsyncProxyReads, kSlicesInFlight). The Hopper loop's
// kernels (fwd_hopper.cuh, bwd_dz_hopper.cuh) run on the TMA ring instead
// (templates/common/tma_ring.cuh).
#pragma once

#include "common/mma_mainloop.cuh"
#include "common/slice_ring.cuh"
#include "linear_logp/fwd_mainloop_simt.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK>
struct LogitMainloop {
  using type = MmaTileMainloop<T, BM, BN, BK, MmaOperand::kKContiguous, MmaOperand::kKContiguous>;
};

template <int BM, int BN, int BK>
struct LogitMainloop<float, BM, BN, BK> {
  using type = SimtMainloop<BM, BN, BK>;
};

}  // namespace kernels
}  // namespace shardjit
