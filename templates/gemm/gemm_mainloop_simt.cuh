// fp32 FMA main loop of the GEMM: fp32 operands (exact fp32, no TF32), or an fp32 A with a
// 16-bit B (dZ kept in fp32 against bf16/fp16 weights). Same contract as GemmMmaMainloop:
// accumulate one BK slice from the pipeline's swizzled tiles, then hand out adjacent pairs.
//
// Threads form a 16 x 16 grid; thread (tm, tn) owns rows tm + 16 i and the column pairs
// 2 tn + 32 j, so a warp reads 2 A values (broadcast) and 32 consecutive B values per k.
#pragma once

#include "common/types.cuh"
#include "gemm/gemm_tile_copy.cuh"

namespace shardjit {
namespace kernels {

template <class TA, class TB, int BM, int BN, int BK, bool A_TRANS>
struct GemmSimtMainloop {
  static constexpr int kGrid = 16;
  static constexpr int kRows = BM / kGrid;
  static constexpr int kRowPairs = BN / (2 * kGrid);
  static_assert(BM % kGrid == 0 && BN % (2 * kGrid) == 0, "tile shape");

  // The ring contract (templates/common/slice_ring.cuh): plain loads, done when compute returns.
  static constexpr bool kAsyncProxyReads = false;
  static constexpr int kSlicesInFlight = 0;

  float acc[kRows][kRowPairs][2];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kRowPairs; ++j) acc[i][j][0] = acc[i][j][1] = 0.0f;
  }

  static __device__ __forceinline__ float a_at(const TA* tile, int m, int k) {
    if constexpr (A_TRANS) {
      return to_float(gemm_tile_at<TA, BM>(tile, k, m));
    } else {
      return to_float(gemm_tile_at<TA, BK>(tile, m, k));
    }
  }

  // `between` (the pipeline's next copies) runs first: FMA work has no fragment loads to start.
  template <class Between>
  __device__ __forceinline__ void compute(const TA* a_stage, const TB* b_stage, int warp, int lane,
                                          Between&& between) {
    between();
    const int tid = warp * 32 + lane;
    const int tm = tid / kGrid;
    const int tn = tid % kGrid;
#pragma unroll 4
    for (int k = 0; k < BK; ++k) {
      float a[kRows];
      float b[kRowPairs][2];
#pragma unroll
      for (int i = 0; i < kRows; ++i) a[i] = a_at(a_stage, tm + kGrid * i, k);
#pragma unroll
      for (int j = 0; j < kRowPairs; ++j) {
        // The two elements of a pair are adjacent in one 16-byte chunk.
        const TB* p = &gemm_tile_at<TB, BN>(b_stage, k, 2 * tn + 2 * kGrid * j);
        b[j][0] = to_float(p[0]);
        b[j][1] = to_float(p[1]);
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i)
#pragma unroll
        for (int j = 0; j < kRowPairs; ++j) {
          acc[i][j][0] = fmaf(a[i], b[j][0], acc[i][j][0]);
          acc[i][j][1] = fmaf(a[i], b[j][1], acc[i][j][1]);
        }
    }
  }

  // Adjacent accumulator pairs a thread holds, and pair i of them (i < kPairs; a compile-time
  // index once the caller's loop is unrolled).
  static constexpr int kPairs = kRows * kRowPairs;
  __device__ __forceinline__ AccumulatorPair pair(int i, int warp, int lane) const {
    const int tid = warp * 32 + lane;
    const int r = i / kRowPairs;
    const int j = i % kRowPairs;
    return {tid / kGrid + kGrid * r, 2 * (tid % kGrid) + 2 * kGrid * j, acc[r][j][0], acc[r][j][1]};
  }
};

}  // namespace kernels
}  // namespace shardjit
