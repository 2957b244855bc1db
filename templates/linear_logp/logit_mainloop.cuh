// The main loops of the kernels that compute logit tiles, X [rows][k] times W [vocab][k] with both
// operands K contiguous (the forward, templates/linear_logp/fwd.cuh, and the dZ kernel,
// templates/linear_logp/bwd_dz.cuh), chosen by the kernels' template parameters:
//   16-bit T, WGMMA = false: the portable tensor-core loop (mma.sync, sm_80 and later);
//   16-bit T, WGMMA = true:  the Hopper loop (wgmma from shared memory, sm_90a only);
//   fp32 T:                  exact fp32 FMA.
// The portable loops take one BK slice of the cp.async ring per compute(a_stage, b_stage, warp,
// lane, between); the Hopper loop's slices come from the TMA ring and are started by issue()
// and waited for by wait<N>(). All hand the tile to the epilogue through store_columns<COLS>().
#pragma once

#include "common/mma_mainloop.cuh"
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

}  // namespace kernels
}  // namespace shardjit
