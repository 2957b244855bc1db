// Store / accumulate epilogue of the GEMM: out = alpha * acc + addend, two adjacent columns at a
// time, in the output's type. Reading the addend and writing the output happen in the same
// thread for the same element, so the addend may be the output itself (in-place accumulation);
// every element belongs to one thread of one block, which keeps the result deterministic.
#pragma once

#include "common/types.cuh"

namespace shardjit {
namespace kernels {

__device__ __forceinline__ float2 load_pair(const float* p) {
  return *reinterpret_cast<const float2*>(p);
}

template <class T>
__device__ __forceinline__ float2 load_pair(const T* p) {
  const unsigned int bits = *reinterpret_cast<const unsigned int*>(p);
  T lo, hi;
  lo.bits = static_cast<unsigned short>(bits & 0xffffu);
  hi.bits = static_cast<unsigned short>(bits >> 16);
  return make_float2(to_float(lo), to_float(hi));
}

__device__ __forceinline__ void store_pair(float* p, float v0, float v1) {
  *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}

__device__ __forceinline__ unsigned int pack_pair(bf16 lo, bf16 hi) {
  return static_cast<unsigned int>(lo.bits) | static_cast<unsigned int>(hi.bits) << 16;
}

__device__ __forceinline__ unsigned int pack_pair(fp16 lo, fp16 hi) {
  return static_cast<unsigned int>(lo.bits) | static_cast<unsigned int>(hi.bits) << 16;
}

__device__ __forceinline__ void store_pair(bf16* p, float v0, float v1) {
  *reinterpret_cast<unsigned int*>(p) = pack_pair(to_bf16(v0), to_bf16(v1));
}

__device__ __forceinline__ void store_pair(fp16* p, float v0, float v1) {
  *reinterpret_cast<unsigned int*>(p) = pack_pair(to_fp16(v0), to_fp16(v1));
}

template <class OutT, class AddT>
struct GemmEpilogue {
  OutT* out;
  const AddT* addend;
  long long out_stride;
  long long addend_stride;
  long long m;
  long long n;
  float alpha;

  // Element (row, col) and (row, col + 1) of the output; col is even and n a multiple of 8, so
  // a pair is either wholly inside or wholly outside.
  __device__ __forceinline__ void operator()(long long row, long long col, float v0, float v1) const {
    if (row >= m || col >= n) return;
    v0 *= alpha;
    v1 *= alpha;
    if (addend != nullptr) {
      const float2 add = load_pair(addend + row * addend_stride + col);
      v0 += add.x;
      v1 += add.y;
    }
    store_pair(out + row * out_stride + col, v0, v1);
  }
};

}  // namespace kernels
}  // namespace shardjit
