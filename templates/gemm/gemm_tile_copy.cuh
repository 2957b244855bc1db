// Shared-memory tiles of the GEMM: a ROWS x COLS block of a row-major matrix (rows strided,
// columns contiguous), stored in 16-byte chunks under an XOR swizzle, and filled by cp.async.
//
// Unlike CpAsyncTile (a K extent fixed at compile time, moving along columns only), the limits
// here are run-time values and a tile may move along either dimension: the GEMM reads dZ both as
// A (K along columns) and as A^T (K along rows), and B (K along rows). Rows at or past the row
// limit and chunks at or past the column limit are zero-filled, so the main loops need no
// masking of their own.
#pragma once

#include "common/ptx.cuh"

namespace shardjit {
namespace kernels {

// Chunk index, from the tile start, of logical chunk `chunk` of row `row` in rows of CPR chunks.
// Reading one logical chunk down 8 consecutive rows (ldmatrix, or the SIMT loop's column reads)
// lands in 8 different 16-byte slots of a 128-byte window, i.e. on different banks.
template <int CPR>
__device__ __forceinline__ int gemm_swizzled_chunk(int row, int chunk) {
  static_assert(CPR == 2 || CPR == 4 || CPR % 8 == 0, "rows are 32, 64 or a multiple of 128 bytes");
  if constexpr (CPR % 8 == 0) {
    return row * CPR + (chunk ^ (row & 7));
  } else if constexpr (CPR == 4) {
    // Two rows share a 128-byte line; only rows of different lines need different slots.
    return row * CPR + (chunk ^ ((row >> 1) & 3));
  } else {
    return row * CPR + (chunk ^ ((row >> 2) & 1));
  }
}

// Element (row, col) of a swizzled tile of T with COLS columns.
template <class T, int COLS>
__device__ __forceinline__ const T& gemm_tile_at(const T* tile, int row, int col) {
  constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = COLS / kElemsPerChunk;
  return tile[gemm_swizzled_chunk<kChunksPerRow>(row, col / kElemsPerChunk) * kElemsPerChunk +
              col % kElemsPerChunk];
}

template <class T, int ROWS, int COLS, int THREADS>
struct GemmTileCopy {
  static constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  static constexpr int kChunksPerRow = COLS / kElemsPerChunk;
  static constexpr int kChunks = ROWS * kChunksPerRow;
  static constexpr int kChunksPerThread = (kChunks + THREADS - 1) / THREADS;
  static_assert(COLS % kElemsPerChunk == 0, "a tile row is a whole number of 16-byte chunks");

  // Copies the block whose element (0, 0) is (row0, col0) of `base` to the tile at shared
  // address `dst`. Zero-filled where row >= row_limit or the chunk starts at col >= col_limit.
  static __device__ __forceinline__ void issue(unsigned int dst, const T* base, long long stride,
                                               long long row0, long long col0, long long row_limit,
                                               long long col_limit, int tid) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = tid + i * THREADS;
      if (kChunks % THREADS != 0 && c >= kChunks) break;
      const int r = c / kChunksPerRow;
      const int chunk = c % kChunksPerRow;
      const long long grow = row0 + r;
      const long long gcol = col0 + chunk * kElemsPerChunk;
      const bool inside = grow < row_limit && gcol < col_limit;
      // A zero-filling copy reads nothing, but its address is still kept valid.
      const T* src = inside ? base + grow * stride + gcol : base;
      cp_async_cg_16(dst + 16u * static_cast<unsigned int>(gemm_swizzled_chunk<kChunksPerRow>(r, chunk)),
                     src, inside ? 16u : 0u);
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
