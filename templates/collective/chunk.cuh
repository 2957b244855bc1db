// A chunk: VEC_BYTES bytes of a row (16 where the row length allows), moved with one vector load
// or store and unpacked into floats for an fp32 sum. The cross-GPU kernels walk their buffers
// chunk by chunk, so that every peer read over NVLink is as wide as the row allows.
#pragma once

#include "common/ptx_memory.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

template <int VEC_BYTES>
struct RawChunk;

template <>
struct RawChunk<16> {
  using type = Bytes16;
  __device__ static type load(const void* p) { return ld_global_v4_u32(p); }
  __device__ static void store(void* p, const type& v) { st_global_v4_u32(p, v); }
};

template <>
struct RawChunk<8> {
  using type = Bytes8;
  __device__ static type load(const void* p) { return ld_global_v2_u32(p); }
  __device__ static void store(void* p, const type& v) { st_global_v2_u32(p, v); }
};

template <>
struct RawChunk<4> {
  using type = Bytes4;
  __device__ static type load(const void* p) { return ld_global_u32(p); }
  __device__ static void store(void* p, const type& v) { st_global_u32(p, v); }
};

template <class T>
__device__ __forceinline__ unsigned int bits_of(T x) { return x.bits; }
template <>
__device__ __forceinline__ unsigned int bits_of<float>(float x) { return __float_as_uint(x); }

template <class T>
__device__ __forceinline__ T of_bits(unsigned int bits) { return T{static_cast<unsigned short>(bits)}; }
template <>
__device__ __forceinline__ float of_bits<float>(unsigned int bits) { return __uint_as_float(bits); }

// Chunks of VEC_BYTES bytes of elements of type T (bf16, fp16 or float).
template <class T, int VEC_BYTES>
struct Chunk {
  static_assert(VEC_BYTES == 4 || VEC_BYTES == 8 || VEC_BYTES == 16, "a chunk is 4, 8 or 16 bytes");
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "elements are 16-bit or fp32");
  using Raw = typename RawChunk<VEC_BYTES>::type;
  static constexpr int kElems = VEC_BYTES / static_cast<int>(sizeof(T));
  static constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  static constexpr int kElemBits = 8 * static_cast<int>(sizeof(T));

  __device__ static Raw load(const void* base, long long chunk) {
    return RawChunk<VEC_BYTES>::load(static_cast<const char*>(base) + chunk * VEC_BYTES);
  }
  __device__ static void store(void* base, long long chunk, const Raw& v) {
    RawChunk<VEC_BYTES>::store(static_cast<char*>(base) + chunk * VEC_BYTES, v);
  }

  __device__ static float element(const Raw& v, int i) {
    const unsigned int word = v.w[i / kPerWord];
    const unsigned int bits = kPerWord == 1 ? word : (word >> (kElemBits * (i % kPerWord))) & 0xffffu;
    return to_float(of_bits<T>(bits));
  }

  // acc += scale * v, element by element, in fp32.
  __device__ static void accumulate(float (&acc)[kElems], const Raw& v, float scale) {
#pragma unroll
    for (int i = 0; i < kElems; ++i) acc[i] = fmaf(scale, element(v, i), acc[i]);
  }
  __device__ static void accumulate(float (&acc)[kElems], const Raw& v) {
#pragma unroll
    for (int i = 0; i < kElems; ++i) acc[i] += element(v, i);
  }

  // Rounds the floats to T, round to nearest even.
  __device__ static Raw pack(const float (&acc)[kElems]) {
    Raw v;
#pragma unroll
    for (int w = 0; w < VEC_BYTES / 4; ++w) {
      unsigned int word = 0;
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) word |= bits_of(from_float<T>(acc[w * kPerWord + j])) << (kElemBits * j);
      v.w[w] = word;
    }
    return v;
  }
};

// The part [begin, end) of `count` items that part `b` of `parts` owns.
__device__ __forceinline__ void block_slice(long long count, int b, int parts, long long& begin, long long& end) {
  begin = count * b / parts;
  end = count * (b + 1) / parts;
}

// Copies chunks [begin, end) of src to dst, `threads` threads from `thread` on, four chunks in
// flight per thread.
template <int VEC_BYTES>
__device__ __forceinline__ void copy_chunks(void* dst, const void* src, long long begin, long long end, int thread,
                                            int threads) {
  using Raw = typename RawChunk<VEC_BYTES>::type;
  constexpr int kUnroll = 4;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  long long i = begin + thread;
  for (; i + (kUnroll - 1) * threads < end; i += kUnroll * threads) {
    Raw v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = RawChunk<VEC_BYTES>::load(s + (i + u * threads) * VEC_BYTES);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) RawChunk<VEC_BYTES>::store(d + (i + u * threads) * VEC_BYTES, v[u]);
  }
  for (; i < end; i += threads) {
    RawChunk<VEC_BYTES>::store(d + i * VEC_BYTES, RawChunk<VEC_BYTES>::load(s + i * VEC_BYTES));
  }
}

}  // namespace kernels
}  // namespace shardjit
