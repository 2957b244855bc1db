// Element types of kernel inputs. NVRTC ships no cuda_bf16.h / cuda_fp16.h, so the 16-bit
// float types are plain bit containers and every conversion is a PTX cvt or a bit operation.
#pragma once

namespace shardjit {
namespace kernels {

struct bf16 {
  unsigned short bits;
};

struct fp16 {
  unsigned short bits;
};

// Bias type of a kernel specialized without a bias.
struct NoBias {};

template <class A, class B>
struct is_same_type {
  static constexpr bool value = false;
};
template <class A>
struct is_same_type<A, A> {
  static constexpr bool value = true;
};

// A if COND, else B (NVRTC has no <type_traits>).
template <bool COND, class A, class B>
struct conditional_type {
  using type = A;
};
template <class A, class B>
struct conditional_type<false, A, B> {
  using type = B;
};

// Two adjacent accumulators of a GEMM-shaped main loop's tile, (row, col) and (row, col + 1) in
// tile coordinates: what the main loops hand their register epilogues (pair(i), i < kPairs).
struct AccumulatorPair {
  int row;
  int col;
  float v0;
  float v1;
};

// bf16 is the high half of an fp32, so widening is exact and needs no instruction.
__device__ __forceinline__ float to_float(bf16 x) {
  return __uint_as_float(static_cast<unsigned int>(x.bits) << 16);
}

__device__ __forceinline__ float to_float(fp16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

__device__ __forceinline__ float to_float(float x) { return x; }

__device__ __forceinline__ bf16 to_bf16(float x) {
  bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}

__device__ __forceinline__ fp16 to_fp16(float x) {
  fp16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}

// x rounded to T: the conversion a kernel templated on its element type writes with.
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) { return to_bf16(x); }
template <>
__device__ __forceinline__ fp16 from_float<fp16>(float x) { return to_fp16(x); }
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }

// Two adjacent elements of a 16-bit type T, rounded from lo and hi, as one 32-bit word (lo in the
// low half, where it sits in memory).
template <class T>
__device__ __forceinline__ unsigned int pack_pair(float lo, float hi) {
  static_assert(sizeof(T) == 2, "a pair of 16-bit elements");
  return static_cast<unsigned int>(from_float<T>(lo).bits) | static_cast<unsigned int>(from_float<T>(hi).bits) << 16;
}

}  // namespace kernels
}  // namespace shardjit
