// Float constants and small numeric helpers. NVRTC defines no INFINITY or NAN, so the values
// are spelled by their bit patterns.
#pragma once

namespace shardjit {
namespace kernels {

// log2(e): exp(x) = 2^(x * log2(e)), the form the multi-function unit computes (exp2_approx).
constexpr float kLog2e = 1.4426950408889634f;

// The largest finite fp16.
constexpr float kFp16Max = 65504.0f;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// The quiet NaN written into outputs poisoned by bad input (a target id out of range).
__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// 2^x by the multi-function unit (ex2.approx.ftz: relative error below 2^-22, 2^-inf = +0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Warp-wide reductions by xor butterfly: every lane ends with the same bits, since at each level
// a lane and its partner add the same two operands.
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

// As warp_max and warp_sum, within each aligned group of WIDTH lanes (a power of two up to 32):
// every lane of a group ends with the same bits.
template <int WIDTH>
__device__ __forceinline__ float lane_group_max(float x) {
  static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0,
                "a lane group is a power of two up to 32 lanes");
#pragma unroll
  for (int offset = WIDTH / 2; offset > 0; offset >>= 1) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

template <int WIDTH>
__device__ __forceinline__ float lane_group_sum(float x) {
  static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0,
                "a lane group is a power of two up to 32 lanes");
#pragma unroll
  for (int offset = WIDTH / 2; offset > 0; offset >>= 1) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

}  // namespace kernels
}  // namespace shardjit
