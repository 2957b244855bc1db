// Tensor-core main loop of linear_logp_fwd for 16-bit inputs (sm_80 and later): the shared main
// loop (templates/common/mma_mainloop.cuh) with both operands K contiguous. X [rows][k] is the
// row-major A operand; W [vocab][k] is already the col-major B operand, so both come from
// shared memory through ldmatrix without transposition.
#pragma once

#include "common/mma_mainloop.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK>
using MmaMainloop = MmaTileMainloop<T, BM, BN, BK, MmaOperand::kKContiguous, MmaOperand::kKContiguous>;

}  // namespace kernels
}  // namespace shardjit
