// Tensor-core main loops of the GEMM for 16-bit operands. B is stored [BK][BN] (N contiguous); A
// is stored [BM][BK] (K contiguous) or, with A_TRANS, [BK][BM] (M contiguous): the backward reads
// dZ [rows][vocab] as A for grad_hidden and as A^T for grad_weight.
//   WGMMA = false: the portable loop (templates/common/mma_mainloop.cuh, mma.sync, sm_80 on);
//   WGMMA = true:  the Hopper loop (templates/common/wgmma_mainloop.cuh, sm_90a only) with the
//                  same operand layouts, one slice left in flight with four stages or more.
#pragma once

#include "common/mma_mainloop.cuh"
#include "common/wgmma_mainloop.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, int STAGES, bool A_TRANS, bool WGMMA>
struct GemmMmaMainloop {
  using type = MmaTileMainloop<T, BM, BN, BK, A_TRANS ? MmaOperand::kMNContiguous : MmaOperand::kKContiguous,
                               MmaOperand::kMNContiguous>;
};

template <class T, int BM, int BN, int BK, int STAGES, bool A_TRANS>
struct GemmMmaMainloop<T, BM, BN, BK, STAGES, A_TRANS, true> {
  using type = WgmmaTileMainloop<T, BM, BN, BK, wgmma_slices_in_flight(STAGES),
                                 A_TRANS ? MmaOperand::kMNContiguous : MmaOperand::kKContiguous,
                                 MmaOperand::kMNContiguous>;
};

}  // namespace kernels
}  // namespace shardjit
