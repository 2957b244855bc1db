// fp32 main loop of linear_logp_fwd: exact fp32 FMA, for inputs whose users asked for fp32 and
// not TF32. Same contract as the tensor-core loops (templates/linear_logp/logit_mainloop.cuh): accumulate one BK slice from the pipeline's swizzled
// X [BM][BK] and W [BN][BK] tiles, then store to the logit tile.
//
// Threads form a 16 x 16 grid; thread (tm, tn) owns rows tm + 16 i and columns tn + 16 j, so a
// warp reads 2 X rows and 16 W rows per 16-byte load, which the swizzle keeps conflict free.
#pragma once

#include "common/swizzle.cuh"

namespace shardjit {
namespace kernels {

template <int BM, int BN, int BK>
struct SimtMainloop {
  static constexpr bool kAsyncProxyReads = false;  // plain shared-memory loads
  static constexpr int kSlicesInFlight = 0;         // compute returns with the slice done
  static constexpr int kGrid = 16;
  static constexpr int kRows = BM / kGrid;
  static constexpr int kCols = BN / kGrid;
  static constexpr int kChunksPerRow = BK / 4;
  static_assert(BM % kGrid == 0 && BN % kGrid == 0 && BK % 4 == 0, "tile shape");

  float acc[kRows][kCols];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = 0.0f;
  }

  // `between` (the pipeline's next copies) runs first: FMA work has no fragment loads to start.
  template <class Between>
  __device__ __forceinline__ void compute(const float* x_stage, const float* w_stage, int warp,
                                          int lane, Between&& between) {
    between();
    const int tid = warp * 32 + lane;
    const int tm = tid / kGrid;
    const int tn = tid % kGrid;
    const float4* x4 = reinterpret_cast<const float4*>(x_stage);
    const float4* w4 = reinterpret_cast<const float4*>(w_stage);
    // Two chunks per iteration let the loads of one overlap the FMAs of the other (~10% faster
    // on H200 than one at a time); unrolling all of them spills at BK = 64.
#pragma unroll 2
    for (int c = 0; c < kChunksPerRow; ++c) {
      float4 x[kRows];
      float4 w[kCols];
#pragma unroll
      for (int i = 0; i < kRows; ++i) x[i] = x4[swizzled_chunk<kChunksPerRow>(tm + kGrid * i, c)];
#pragma unroll
      for (int j = 0; j < kCols; ++j) w[j] = w4[swizzled_chunk<kChunksPerRow>(tn + kGrid * j, c)];
#pragma unroll
      for (int i = 0; i < kRows; ++i)
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          float a = acc[i][j];
          a = fmaf(x[i].x, w[j].x, a);
          a = fmaf(x[i].y, w[j].y, a);
          a = fmaf(x[i].z, w[j].z, a);
          a = fmaf(x[i].w, w[j].w, a);
          acc[i][j] = a;
        }
    }
  }

  __device__ __forceinline__ void store(float* logits, int ld, int warp, int lane) const {
    const int tid = warp * 32 + lane;
    const int tm = tid / kGrid;
    const int tn = tid % kGrid;
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) logits[(tm + kGrid * i) * ld + tn + kGrid * j] = acc[i][j];
  }

  // As MmaTileMainloop::store_columns: columns [chunk * COLS, (chunk + 1) * COLS) of the tile to the
  // logit tile [BM][ld], whose column 0 is tile column chunk * COLS.
  template <int COLS>
  __device__ __forceinline__ void store_columns(float* logits, int ld, int chunk, int warp,
                                                int lane) const {
    static_assert(BN % COLS == 0 && COLS % kGrid == 0, "chunks hold whole column groups");
    const int tid = warp * 32 + lane;
    const int tm = tid / kGrid;
    const int tn = tid % kGrid;
    const int j0 = chunk * (COLS / kGrid);
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (j >= j0 && j < j0 + COLS / kGrid) {
          logits[(tm + kGrid * i) * ld + tn + kGrid * (j - j0)] = acc[i][j];
        }
      }
  }
};

}  // namespace kernels
}  // namespace shardjit
