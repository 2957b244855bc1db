// Tensor-core main loop of linear_logp_fwd for 16-bit inputs (sm_80 and later): the block's
// BM x BN logit tile is accumulated in fp32 by mma.sync m16n8k16, one BK slice of the pipeline
// at a time, then handed to the epilogue through the shared-memory logit tile.
//
// Eight warps as 2 (M) x 4 (N), or 4 x 2 for 256-row tiles; each owns a kWarpM x kWarpN block
// of MT x NT mma tiles, at most 64 x 64 (128 accumulators a thread). The wider the warp's block,
// the fewer ldmatrix per mma (a 64 x 64 block loads 8 fragments for 32 mma, 64 x 32 loads 6 for
// 16), and the wider the block's tile, the fewer bytes each mma pulls through L2.
// X [rows][k] is the row-major A operand; W [vocab][k] is already the col-major B operand, so
// both come from shared memory through ldmatrix without transposition.
#pragma once

#include "common/ptx.cuh"
#include "common/swizzle.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK>
struct MmaMainloop {
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value,
                "the mma main loop takes bf16 or fp16");
  static constexpr int kThreads = 256;
  static constexpr int kWarpsM = BM >= 256 ? 4 : 2;
  static constexpr int kWarpsN = kThreads / 32 / kWarpsM;
  static constexpr int kWarpM = BM / kWarpsM;
  static constexpr int kWarpN = BN / kWarpsN;
  static constexpr int kMTiles = kWarpM / 16;
  static constexpr int kNTiles = kWarpN / 8;
  static constexpr int kChunksPerRow = BK / 8;
  static_assert(BM % (16 * kWarpsM) == 0 && BN % (16 * kWarpsN) == 0 && BK % 16 == 0,
                "tile shape");
  static_assert(kNTiles % 2 == 0, "B fragments are loaded 16 columns at a time");
  static_assert(kMTiles * kNTiles <= 32, "at most 64 x 64 accumulators a warp (registers)");

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

  // Loads the A and B fragments of k16 step kk of the stage.
  __device__ __forceinline__ void load_fragments(unsigned int (&a)[kMTiles][4],
                                                 unsigned int (&b)[kNTiles][2], unsigned int x_base,
                                                 unsigned int w_base, int a_row, int a_chunk,
                                                 int b_row, int b_chunk, int kk) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int chunk = swizzled_chunk<kChunksPerRow>(a_row + mt * 16, kk * 2 + a_chunk);
      ldmatrix_x4(a[mt], x_base + 16u * static_cast<unsigned int>(chunk));
    }
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      const int chunk = swizzled_chunk<kChunksPerRow>(b_row + np * 16, kk * 2 + b_chunk);
      unsigned int r[4];
      ldmatrix_x4(r, w_base + 16u * static_cast<unsigned int>(chunk));
      b[2 * np][0] = r[0];
      b[2 * np][1] = r[1];
      b[2 * np + 1][0] = r[2];
      b[2 * np + 1][1] = r[3];
    }
  }

  // Accumulates one BK slice: x_stage is the stage's X tile [BM][BK], w_stage its W tile [BN][BK].
  // Fragments are double-buffered so that the loads of step kk + 1 overlap the mma of step kk.
  // `between` (the pipeline's next copies) runs once the first fragments are requested, so the
  // tensor cores are fed right after the pipeline barrier rather than after the copy issue.
  template <class Between>
  __device__ __forceinline__ void compute(const T* x_stage, const T* w_stage, int warp, int lane,
                                          Between&& between) {
    const unsigned int x_base = smem_addr(x_stage);
    const unsigned int w_base = smem_addr(w_stage);
    const int m0 = (warp / kWarpsN) * kWarpM;
    const int n0 = (warp % kWarpsN) * kWarpN;
    // ldmatrix.x4 matrix q = lane / 8 supplies, for A: rows +8*(q&1), k chunk q>>1 (a0..a3);
    // for B: columns +8*(q>>1), k chunk q&1 (b0, b1 of two adjacent n8 tiles).
    const int a_row = m0 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const int a_chunk = lane >> 4;
    const int b_row = n0 + (lane & 7) + (lane >> 4) * 8;
    const int b_chunk = (lane >> 3) & 1;
    constexpr int kSteps = BK / 16;
    unsigned int a[2][kMTiles][4];
    unsigned int b[2][kNTiles][2];
    load_fragments(a[0], b[0], x_base, w_base, a_row, a_chunk, b_row, b_chunk, 0);
    between();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      if (kk + 1 < kSteps) {
        load_fragments(a[(kk + 1) & 1], b[(kk + 1) & 1], x_base, w_base, a_row, a_chunk, b_row,
                       b_chunk, kk + 1);
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          mma(acc[mt][nt], a[kk & 1][mt], b[kk & 1][nt][0], b[kk & 1][nt][1]);
        }
    }
  }

  // Writes all the accumulators to the logit tile [BM][ld].
  __device__ __forceinline__ void store(float* logits, int ld, int warp, int lane) const {
    store_block(logits, ld, (warp % kWarpsN) * kWarpN, warp, lane);
  }

  // Writes the columns [chunk * COLS, (chunk + 1) * COLS) of the tile to the logit tile
  // [BM][ld], whose column 0 is tile column chunk * COLS: the epilogue then takes the tile one
  // chunk at a time, and the logit tile needs only COLS columns. A warp's block lies wholly in
  // one chunk, so each warp either stores all its accumulators or none.
  template <int COLS>
  __device__ __forceinline__ void store_columns(float* logits, int ld, int chunk, int warp,
                                                int lane) const {
    static_assert(BN % COLS == 0 && COLS % kWarpN == 0, "chunks hold whole warp blocks");
    const int col0 = (warp % kWarpsN) * kWarpN - chunk * COLS;
    if (col0 >= 0 && col0 < COLS) store_block(logits, ld, col0, warp, lane);
  }

 private:
  // The warp's block, its column 0 at column col0 of the logit tile: c0, c1 are row g, columns
  // 2t and 2t+1 of an m16n8 tile; c2, c3 the same columns of row g + 8 (g = lane / 4,
  // t = lane % 4).
  __device__ __forceinline__ void store_block(float* logits, int ld, int col0, int warp,
                                              int lane) const {
    const int row = (warp / kWarpsN) * kWarpM + (lane >> 2);
    const int col = col0 + (lane & 3) * 2;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        float* p = logits + (row + mt * 16) * ld + col + nt * 8;
        *reinterpret_cast<float2*>(p) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(p + 8 * ld) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
  }
};

}  // namespace kernels
}  // namespace shardjit
