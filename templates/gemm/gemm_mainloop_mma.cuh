// Tensor-core main loop of the GEMM for 16-bit operands (sm_80 and later): the block's BM x BN
// output tile is accumulated in fp32 by mma.sync m16n8k16, one BK slice at a time, from the
// swizzled shared-memory tiles of the pipeline (templates/gemm/gemm_tile_copy.cuh).
//
// Eight warps as 2 (M) x 4 (N), as in the forward's main loop; each owns (BM/2) x (BN/4).
// B is stored [BK][BN] (N contiguous), so its col-major fragments come from ldmatrix.trans.
// A is stored [BM][BK] (plain ldmatrix) or, with A_TRANS, [BK][BM] (ldmatrix.trans): the
// backward reads dZ [rows][vocab] as A for grad_hidden and as A^T for grad_weight.
#pragma once

#include "common/ptx.cuh"
#include "common/types.cuh"
#include "gemm/gemm_tile_copy.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, bool A_TRANS>
struct GemmMmaMainloop {
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value,
                "the mma main loop takes bf16 or fp16");
  static constexpr int kWarpsN = 4;
  static constexpr int kWarpM = BM / 2;
  static constexpr int kWarpN = BN / kWarpsN;
  static constexpr int kMTiles = kWarpM / 16;
  static constexpr int kNTiles = kWarpN / 8;
  // Chunks per row of the stored tiles.
  static constexpr int kACpr = A_TRANS ? BM / 8 : BK / 8;
  static constexpr int kBCpr = BN / 8;
  static_assert(BM % 32 == 0 && BN % 64 == 0 && BK % 16 == 0, "tile shape");
  static_assert(kNTiles % 2 == 0, "B fragments are loaded 16 columns at a time");

  float acc[kMTiles][kNTiles][4];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
  }

  static __device__ __forceinline__ void mma(float (&d)[4], const unsigned int (&a)[4],
                                             unsigned int b0, unsigned int b1) {
    if constexpr (is_same_type<T, bf16>::value) {
      mma_m16n8k16_bf16f32(d, a, b0, b1);
    } else {
      mma_m16n8k16_f16f32(d, a, b0, b1);
    }
  }

  // ldmatrix.x4 matrix q = lane / 8 of an A fragment is (rows +8 * (q & 1), k +8 * (q >> 1));
  // of a B fragment pair, (k +8 * (q & 1), columns +8 * (q >> 1)).
  __device__ __forceinline__ void load_fragments(unsigned int (&a)[kMTiles][4],
                                                 unsigned int (&b)[kNTiles][2], unsigned int a_base,
                                                 unsigned int b_base, int m0, int n0, int lane,
                                                 int kk) const {
    const int q = lane >> 3;
    const int r8 = lane & 7;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int m = m0 + mt * 16 + (q & 1) * 8;
      const int k = kk * 16 + (q >> 1) * 8;
      if constexpr (A_TRANS) {
        const int chunk = gemm_swizzled_chunk<kACpr>(k + r8, m / 8);
        ldmatrix_x4_trans(a[mt], a_base + 16u * static_cast<unsigned int>(chunk));
      } else {
        const int chunk = gemm_swizzled_chunk<kACpr>(m + r8, k / 8);
        ldmatrix_x4(a[mt], a_base + 16u * static_cast<unsigned int>(chunk));
      }
    }
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      const int k = kk * 16 + (q & 1) * 8 + r8;
      const int n = n0 + np * 16 + (q >> 1) * 8;
      unsigned int r[4];
      ldmatrix_x4_trans(r, b_base + 16u * static_cast<unsigned int>(gemm_swizzled_chunk<kBCpr>(k, n / 8)));
      b[2 * np][0] = r[0];
      b[2 * np][1] = r[1];
      b[2 * np + 1][0] = r[2];
      b[2 * np + 1][1] = r[3];
    }
  }

  // Accumulates one BK slice. Fragments are double-buffered so that the loads of step kk + 1
  // overlap the mma of step kk; `between` (the pipeline's next copies) runs once the first
  // fragments are requested.
  template <class Between>
  __device__ __forceinline__ void compute(const T* a_stage, const T* b_stage, int warp, int lane,
                                          Between&& between) {
    const unsigned int a_base = smem_addr(a_stage);
    const unsigned int b_base = smem_addr(b_stage);
    const int m0 = (warp / kWarpsN) * kWarpM;
    const int n0 = (warp % kWarpsN) * kWarpN;
    constexpr int kSteps = BK / 16;
    unsigned int a[2][kMTiles][4];
    unsigned int b[2][kNTiles][2];
    load_fragments(a[0], b[0], a_base, b_base, m0, n0, lane, 0);
    between();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      if (kk + 1 < kSteps) load_fragments(a[(kk + 1) & 1], b[(kk + 1) & 1], a_base, b_base, m0, n0, lane, kk + 1);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          mma(acc[mt][nt], a[kk & 1][mt], b[kk & 1][nt][0], b[kk & 1][nt][1]);
        }
    }
  }

  // Calls f(row, col, v0, v1) for each pair of adjacent accumulators (columns col, col + 1) of
  // the thread, in tile coordinates: c0, c1 are row g, columns 2t, 2t + 1 of an m16n8 tile; c2,
  // c3 the same columns of row g + 8 (g = lane / 4, t = lane % 4).
  template <class F>
  __device__ __forceinline__ void for_each_pair(int warp, int lane, F&& f) const {
    const int row = (warp / kWarpsN) * kWarpM + (lane >> 2);
    const int col = (warp % kWarpsN) * kWarpN + (lane & 3) * 2;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        f(row + mt * 16, col + nt * 8, acc[mt][nt][0], acc[mt][nt][1]);
        f(row + mt * 16 + 8, col + nt * 8, acc[mt][nt][2], acc[mt][nt][3]);
      }
  }
};

}  // namespace kernels
}  // namespace shardjit
