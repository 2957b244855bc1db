// Tensor-core main loop of the GEMM for 16-bit operands (sm_80 and later): the shared main loop
// (templates/common/mma_mainloop.cuh) with the GEMM's operand tiles. B is stored [BK][BN]
// (N contiguous); A is stored [BM][BK] (K contiguous) or, with A_TRANS, [BK][BM] (M contiguous):
// the backward reads dZ [rows][vocab] as A for grad_hidden and as A^T for grad_weight.
#pragma once

#include "common/mma_mainloop.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, bool A_TRANS>
using GemmMmaMainloop =
    MmaTileMainloop<T, BM, BN, BK, A_TRANS ? MmaOperand::kMNContiguous : MmaOperand::kKContiguous,
                    MmaOperand::kMNContiguous>;

}  // namespace kernels
}  // namespace shardjit
