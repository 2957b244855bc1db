// Thin wrappers over the PTX instructions the portable (sm_80 and later) GEMM paths use: one
// instruction per function, named after it. Shared-memory operands are 32-bit shared-window
// addresses (see smem_addr), which is what the instructions take.
#pragma once

namespace shardjit {
namespace kernels {

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes global -> shared, bypassing L1 (the tiles are reused through shared memory,
// not L1). With src_bytes = 0 nothing is read and the 16 bytes are zero-filled, which is how
// out-of-range rows and K chunks become zeros without a branch around the copy.
__device__ __forceinline__ void cp_async_cg_16(unsigned int dst, const void* src,
                                               unsigned int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// An L2 eviction priority for the lines a copy brings in (createpolicy.fractional, all of them).
enum class L2Priority { kNormal, kEvictFirst };

// The cache policy operand of the copies of priority PRIORITY (0, unused, for kNormal): made once
// and passed to every copy of a slice.
template <L2Priority PRIORITY>
__device__ __forceinline__ unsigned long long l2_policy() {
  if constexpr (PRIORITY == L2Priority::kNormal) {
    return 0ull;
  } else {
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    return policy;
  }
}

// cp_async_cg_16 with an L2 cache policy from l2_policy.
__device__ __forceinline__ void cp_async_cg_16_hint(unsigned int dst, const void* src, unsigned int src_bytes,
                                                    unsigned long long policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes), "l"(policy)
               : "memory");
}

// A 16-byte copy with the line priority PRIORITY; policy is l2_policy<PRIORITY>().
template <L2Priority PRIORITY>
__device__ __forceinline__ void cp_async_cg_16_with(unsigned int dst, const void* src, unsigned int src_bytes,
                                                    unsigned long long policy) {
  if constexpr (PRIORITY == L2Priority::kNormal) {
    cp_async_cg_16(dst, src, src_bytes);
  } else {
    cp_async_cg_16_hint(dst, src, src_bytes, policy);
  }
}

// Brings the 128-byte line holding `p` into L2, without waiting for it.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

__device__ __forceinline__ void cp_async_commit_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes an immediate in [0, 7]");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lane l supplies the address of row (l % 8) of matrix (l / 8), and
// register i receives matrix i in the mma fragment order (lane l holds row l / 4, columns
// 2 * (l % 4) and 2 * (l % 4) + 1).
__device__ __forceinline__ void ldmatrix_x4(unsigned int (&r)[4], unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// As ldmatrix_x4, each 8x8 matrix transposed on the way: lane l receives the elements at rows
// 2 * (l % 4) and 2 * (l % 4) + 1 of column l / 4 of the matrix as stored. This turns a tile
// stored with the mma's M or N dimension contiguous into the fragment order the mma expects.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int (&r)[4], unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// An 8x8 matrix of b16 pairs in the mma fragment order (lane l holds row l / 4, columns
// 2 * (l % 4) and 2 * (l % 4) + 1), transposed in registers: lane l receives the same positions of
// the transpose. No shared memory: how a tile whose accumulator rows are the output's columns is
// turned into pairs of adjacent output columns.
__device__ __forceinline__ unsigned int movmatrix_trans(unsigned int a) {
  unsigned int d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// D = A * B + D with A 16x16 (row), B 16x8 (col), fp32 accumulators.
__device__ __forceinline__ void mma_m16n8k16_bf16f32(float (&d)[4], const unsigned int (&a)[4],
                                                     unsigned int b0, unsigned int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_m16n8k16_f16f32(float (&d)[4], const unsigned int (&a)[4],
                                                    unsigned int b0, unsigned int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace kernels
}  // namespace shardjit
