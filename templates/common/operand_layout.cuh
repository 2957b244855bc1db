// How an operand tile of a GEMM-shaped main loop lies in shared memory: K contiguous ([rows][BK],
// X and W of the logit kernels, dZ read as A of grad_hidden) or M / N contiguous ([BK][cols],
// dZ read as A^T of grad_weight, and B [k][n] of the GEMM). The tensor-core main loops
// (mma_mainloop.cuh, wgmma_mainloop.cuh) take one per operand.
//
// kMNContiguousBlocks is M / N contiguous stored as the TMA boxes of the Hopper GEMM write it
// (templates/gemm/gemm_tma.cuh): 64-index column blocks, each all BK rows of 128 bytes; only the
// wgmma loop reads it.
#pragma once

namespace shardjit {
namespace kernels {

enum class MmaOperand { kKContiguous, kMNContiguous, kMNContiguousBlocks };

}  // namespace kernels
}  // namespace shardjit
