// How an operand tile of a GEMM-shaped main loop lies in shared memory: K contiguous ([rows][BK],
// X and W of the logit kernels, dZ read as A of grad_hidden) or M / N contiguous ([BK][cols],
// dZ read as A^T of grad_weight, and B [k][n] of the GEMM). The tensor-core main loops
// (mma_mainloop.cuh, wgmma_mainloop.cuh) take one per operand.
#pragma once

namespace shardjit {
namespace kernels {

enum class MmaOperand { kKContiguous, kMNContiguous };

}  // namespace kernels
}  // namespace shardjit
