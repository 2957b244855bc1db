// Backward of LinearLogp, bias gradient: grad_bias[v] = alpha * sum_i dZ[i][v] (+ addend[v]) over
// one vocabulary chunk's dZ buffer, in fp32.
//
// Grid: x = ceil(cols / kBiasGradCols). Block: kBiasGradThreads = 8 warps; lane l of every warp
// owns columns 2 l and 2 l + 1 of the block's 64, and warp w sums rows w, w + 8, ... in order;
// the 8 partial sums are then added in warp order. The order of every addition is fixed, so the
// result does not depend on the launch.
#pragma once

#include "common/types.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "linear_logp/bwd_bias_args.cuh"

namespace shardjit {
namespace kernels {

constexpr int kBiasGradThreads = 256;
constexpr int kBiasGradCols = 64;

template <class DZ, class OutT>
__global__ void __launch_bounds__(kBiasGradThreads) linear_logp_bwd_bias(const LinearLogpBwdBiasArgs args) {
  constexpr int kWarps = kBiasGradThreads / 32;
  __shared__ float partial[kWarps][kBiasGradCols];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int col = static_cast<int>(blockIdx.x) * kBiasGradCols + 2 * lane;
  // The buffer's columns up to the next multiple of 8 hold zeros, so pairs there may be read.
  const int padded = (args.cols + 7) & ~7;

  float sum0 = 0.0f;
  float sum1 = 0.0f;
  if (col < padded) {
    const DZ* p = static_cast<const DZ*>(args.dz) + col;
#pragma unroll 4
    for (long long row = warp; row < args.n_rows; row += kWarps) {
      const float2 v = load_pair(p + row * args.dz_stride);
      sum0 += v.x;
      sum1 += v.y;
    }
  }
  partial[warp][2 * lane] = sum0;
  partial[warp][2 * lane + 1] = sum1;
  __syncthreads();

  const int c = static_cast<int>(threadIdx.x);
  const int v = static_cast<int>(blockIdx.x) * kBiasGradCols + c;
  if (c >= kBiasGradCols || v >= args.cols) return;
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += partial[w][c];
  if (args.alpha != nullptr) total *= *args.alpha;
  if (args.addend != nullptr) total += to_float(static_cast<const OutT*>(args.addend)[v]);
  OutT* out = static_cast<OutT*>(args.out) + v;
  if constexpr (is_same_type<OutT, float>::value) {
    *out = total;
  } else if constexpr (is_same_type<OutT, bf16>::value) {
    *out = to_bf16(total);
  } else {
    *out = to_fp16(total);
  }
}

}  // namespace kernels
}  // namespace shardjit
