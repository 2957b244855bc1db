// Backward of LinearLogp: the power of two s by which dZ is multiplied before it is stored in 16
// bits, chosen on the device so that no host synchronization is needed. |dZ_iv| is at most
// (2 |g_i| + |h_i| + |e_i| (|H_i| + 1/e)) / T: with x = z_iv - lse_i <= 0 and p = exp(x), the
// entropy term e p (x + H) is at most |e| (p |x| + p |H|), and p |x| = -x exp(x) <= 1/e. So with
// m the largest such bound over the rows, s = 2^k is the largest power of two with
// m * s < 2^LIMIT_LOG2. Small upstream gradients (RL losses divide by token
// counts) then keep the precision of the 16-bit format instead of sinking into its subnormals or
// to zero (fp16 has nothing below 6e-8), and large ones do not overflow it. The GEMM epilogues
// multiply by 1 / s, which is exact: s is a power of two.
//
// Launch: one block of kBwdScaleThreads threads. Writes scale[0] = s and scale[1] = 1 / s.
#pragma once

#include "linear_logp/bwd_scale_args.cuh"

namespace shardjit {
namespace kernels {

constexpr int kBwdScaleThreads = 1024;

template <int LIMIT_LOG2>
__global__ void __launch_bounds__(kBwdScaleThreads) linear_logp_bwd_scale(const LinearLogpBwdScaleArgs args) {
  static_assert(LIMIT_LOG2 >= 1 && LIMIT_LOG2 <= 100, "LIMIT_LOG2 is in [1, 100]");
  __shared__ float warp_bounds[kBwdScaleThreads / 32];
  float bound = 0.0f;
  for (long long i = threadIdx.x; i < args.n_rows; i += kBwdScaleThreads) {
    const float g = args.grad_logp != nullptr ? fabsf(args.grad_logp[i]) : 0.0f;
    const float h = args.grad_lse != nullptr ? fabsf(args.grad_lse[i]) : 0.0f;
    // 1/e = 0.3679 rounded up.
    const float e = args.grad_entropy != nullptr ? fabsf(args.grad_entropy[i]) * (fabsf(args.entropy[i]) + 0.368f) : 0.0f;
    bound = fmaxf(bound, 2.0f * g + h + e);  // a NaN is left out here; it reaches dZ regardless
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) bound = fmaxf(bound, __shfl_xor_sync(0xffffffffu, bound, offset));
  if (threadIdx.x % 32 == 0) warp_bounds[threadIdx.x / 32] = bound;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 0; w < kBwdScaleThreads / 32; ++w) bound = fmaxf(bound, warp_bounds[w]);
  bound *= args.inv_temperature;

  // m lies in [2^(E - 127), 2^(E - 126)) for its biased exponent E, so s = 2^(LIMIT_LOG2 - E + 126)
  // keeps m * s below 2^LIMIT_LOG2. The biased exponent of s is clamped so that s and 1 / s are
  // both normal floats. No gradient (m = 0) or an infinite one leaves s = 1.
  int biased = 127;
  const unsigned int bits = __float_as_uint(bound);
  const int e = static_cast<int>(bits >> 23);
  if (bound > 0.0f && e < 255) {
    biased = LIMIT_LOG2 + 253 - (e > 0 ? e : 1);
    biased = biased < 1 ? 1 : (biased > 253 ? 253 : biased);
  }
  args.scale[0] = __uint_as_float(static_cast<unsigned int>(biased) << 23);
  args.scale[1] = __uint_as_float(static_cast<unsigned int>(254 - biased) << 23);
}

}  // namespace kernels
}  // namespace shardjit
